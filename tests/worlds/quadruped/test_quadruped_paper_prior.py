"""The paper's Minitaur prior in pacplan's layout chooses the gait the paper's code would.

Oracle: the paper's own net and map written out here independently (torch layers as in its
`policy/minitaur_policy.py`; outputs read as its `execute_policy` reads them: a1, a2, steering,
speed), against pacplan's policy on the converted weights, on real observations."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pacplan.errors import PacplanError
from pacplan.io.paperdata import paper_data_dir
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.episode import initial, observation
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.paper_prior import from_paper_layout, load_paper_prior
from pacplan.worlds.quadruped.policy import policy_output


def _paper_gait(theta: np.ndarray, depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
    conv, lin = torch.nn.Conv2d(1, 2, 5, 5), torch.nn.Linear(222, 4)
    flat = torch.as_tensor(theta, dtype=torch.float64)
    at = 0
    for p in (*conv.parameters(), *lin.parameters()):  # the paper's parameters() order
        p.data = flat[at:at + p.numel()].view(p.shape).clone()
        at += p.numel()
    x = torch.as_tensor(depth, dtype=torch.float64).view(1, 1, 50, 50)
    feat = torch.tanh(conv.double()(x)).view(1, -1)
    c = torch.sigmoid(lin.double()(torch.cat([feat, torch.as_tensor(proprio[None],
                                                                     dtype=torch.float64)], 1)))[0]
    a1, a2 = c[0].item() * 0.8 + 0.2, c[1].item() * 0.8 + 0.2
    steer = min(max(c[2].item(), 0.0), min(1 - a1, 1 - a2))
    return GaitParams(a1=a1, a2=a2, a_st=steer, omega=c[3].item() * 20 + 20)


def test_converted_weights_choose_the_papers_gait() -> None:
    world = QuadrupedWorld(physics="mujoco")
    rng = np.random.default_rng(0)
    thetas = rng.normal(0.0, 0.3, (4, 944))
    folder = paper_data_dir()
    if folder is not None:
        mu, logvar = (np.load(folder / f"{k}_minitaur_best.npy") for k in ("mu", "logvar"))
        thetas = np.vstack([thetas, mu[None].astype(np.float64)])
        converted_mu, converted_logvar = load_paper_prior(folder)
        np.testing.assert_array_equal(converted_logvar, from_paper_layout(logvar))
        assert np.array_equal(np.sort(converted_mu), np.sort(mu.astype(np.float64)))
    for seed in (0, 1):
        initial(world.sim, world.terrain(seed))
        obs = observation(world.sim)
        depth, proprio = obs["depth"].astype(np.float64), obs["proprio"].astype(np.float64)
        for theta in thetas:
            ours = GaitParams.from_policy_output(policy_output(from_paper_layout(theta), depth,
                                                               proprio))
            paper = _paper_gait(theta, depth, proprio)
            for field in ("a1", "a2", "a_st", "omega"):
                assert getattr(ours, field) == pytest.approx(getattr(paper, field), abs=1e-9)
    world.close()


def test_a_wrong_length_is_refused() -> None:
    with pytest.raises(PacplanError, match="944 weights, got 943"):
        from_paper_layout(np.zeros(943))
