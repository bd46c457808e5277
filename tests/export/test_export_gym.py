"""`pacplan export` of a gym-world run: the runtime's actions are the world's own policy's, its
episodes cost what the certificate's matrix says, and a family it cannot fly is refused.

The oracle is the gym world itself: `GymWorld.policy_family().act` on the same flattened
observations, and the certified cost matrix, replayed by rolling the environment with the
planner's actions."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from helpers import cli
from pacplan.config import parse_config
from pacplan.export import export_planner
from pacplan.io.files import sha256_file
from pacplan.pipeline.pipeline import run
from pacplan.worlds.from_gym.policies import LinearPolicy
from pacplan.worlds.from_gym.world import GymWorld
from pacplan_runtime import GymDecision, Planner, PlannerError

HORIZON = 20
WORLDS = {  # a discrete action with the linear family, a bounded box with the mlp family
    "cartpole-linear": {"env_id": "CartPole-v1", "policy": "linear", "horizon": HORIZON,
                        "return_bounds": [0, HORIZON]},
    "pendulum-mlp": {"env_id": "Pendulum-v1", "policy": "mlp", "hidden": 3, "horizon": HORIZON,
                     "reward_bounds": [-17, 0]},
}


def _config(options: dict[str, Any]) -> dict[str, Any]:
    """A gym run of a couple of seconds: 2 ES iterations, 6 policies, N = 30."""
    return {
        "name": "gym-export-test",
        "world": {"name": "gym", "options": options},
        "seeds": {"prior": [0, 100], "cert": [10_000, 10_030], "test": [20_000, 20_010]},
        "es": {"iterations": 2, "envs_per_iter": 4, "pairs_per_env": 2, "seed": 1},
        "executor": {"kind": "serial", "chunk_policies": 8, "chunk_seeds": 30},
        "policies": {"m": 6, "seed": 3},
        "certificate": {"n": [30], "delta": 0.05},
        "report": {"trajectories": 0},
    }


def copied_linear(observation_space: gym.Space, action_space: gym.Space) -> LinearPolicy:
    """A user's `module:factory` family (the linear one, but the runtime cannot know that)."""
    return LinearPolicy(int(gym.spaces.flatdim(observation_space)), action_space)


@pytest.fixture(scope="module", params=sorted(WORLDS))
def exported(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[str, Path, Path]:
    out = tmp_path_factory.mktemp(request.param)
    run(parse_config(_config(WORLDS[request.param])), out / "run", progress=False)
    return request.param, out / "run", export_planner(out / "run", out / "planner")


def _episodes(planner: Planner) -> dict[int, Any]:
    """One episode handle for every policy of the support (drawn as the certified use)."""
    found: dict[int, Any] = {}
    rng = np.random.default_rng(0)
    for _ in range(500):
        ep = planner.episode(rng)
        found.setdefault(ep.policy, ep)
        if len(found) == len(planner.policy_index):
            return found
    raise AssertionError("the draws never covered the support")


def _fly(env_options: dict[str, Any], act: Any, seed: int) -> float:
    """The return of one episode of environment `seed`, set up as the gym world sets it up."""
    env = gym.make(env_options["env_id"], max_episode_steps=HORIZON, disable_env_checker=True)
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    total = 0.0
    for _ in range(HORIZON):
        obs, reward, terminated, truncated, _ = env.step(act(np.asarray(obs, np.float64).ravel()))
        total += float(reward)
        if terminated or truncated:
            break
    return total


def test_gym_planner_verifies_and_acts_as_the_worlds_policy(exported, capsys) -> None:
    name, run_dir, planner_dir = exported
    code, out, err = cli(["verify", str(planner_dir)], capsys)
    assert code == 0 and "OK planner" in out, err
    planner = Planner.load(planner_dir)
    assert planner.world == "gym"
    family = GymWorld(**WORLDS[name]).policy_family()
    policies = np.load(run_dir / "policies.npy").astype(np.float64)
    discrete = WORLDS[name]["env_id"] == "CartPole-v1"
    compared = 0
    for policy, ep in _episodes(planner).items():
        def act(obs: np.ndarray, policy: int = policy, ep: Any = ep) -> Any:
            nonlocal compared
            decision = ep.act(obs)
            assert isinstance(decision, GymDecision)
            expected = family.act(policies[policy][None], obs[None])[0]
            if discrete:
                assert decision.action == expected
            else:  # float64 sums in another order, then cast to the box's float32
                assert decision.action.dtype == expected.dtype
                assert decision.action.shape == expected.shape
                np.testing.assert_allclose(decision.action, expected, rtol=1e-6, atol=1e-6)
            compared += 1
            return decision.action

        for seed in (10_000, 10_001):
            _fly(WORLDS[name], act, seed)
    assert compared >= 2 * len(planner.policy_index)


def test_gym_planner_replays_the_certified_costs(exported) -> None:
    """Each support policy, acting through the runtime on the first certification seeds, gets
    the cost the certification matrix holds for it."""
    name, run_dir, planner_dir = exported
    world = GymWorld(**WORLDS[name])
    cert = np.load(run_dir / "costs" / "cert.npy").astype(np.float64)
    planner = Planner.load(planner_dir)
    for policy, ep in _episodes(planner).items():
        for row, seed in enumerate((10_000, 10_001, 10_002)):
            ret = _fly(WORLDS[name], lambda obs, ep=ep: ep.act(obs).action, seed)
            cost = (world.r_max - ret) / (world.r_max - world.r_min)
            if name == "cartpole-linear":  # whole steps survived: no rounding to forgive
                assert cost == cert[row, policy]
            else:
                assert cost == pytest.approx(cert[row, policy], abs=1e-6)


def test_gym_observation_of_another_shape_is_refused(exported) -> None:
    _, _, planner_dir = exported
    planner = Planner.load(planner_dir)
    ep = planner.episode(np.random.default_rng(1))
    obs_dim = json.loads((planner_dir / "planner.json").read_text())["fixed"]["obs_dim"]
    with pytest.raises(PlannerError, match=rf"flattened numeric \({obs_dim},\)"):
        ep.act(np.zeros(obs_dim + 1))
    with pytest.raises(PlannerError, match="NaN or infinity"):
        ep.act(np.full(obs_dim, np.nan))


def test_gym_nets_have_the_hashes_the_runtime_knows() -> None:
    from pacplan.worlds.from_gym.export import GYM_WEIGHTS, gym_net_onnx
    from pacplan_runtime.spec import GYM_NET_SHA256

    assert set(GYM_NET_SHA256) == set(GYM_WEIGHTS)
    for family in GYM_WEIGHTS:
        assert hashlib.sha256(gym_net_onnx(family)).hexdigest() in GYM_NET_SHA256[family]


def _rehash(planner: Path) -> None:
    manifest = json.loads((planner / "manifest.json").read_text())
    manifest["files"] = {f: sha256_file(planner / f) for f in manifest["files"]}
    (planner / "manifest.json").write_text(json.dumps(manifest))


def test_runtime_refuses_a_family_it_does_not_know(exported, tmp_path: Path, capsys) -> None:
    _, _, planner_dir = exported
    planner = Path(shutil.copytree(planner_dir, tmp_path / "planner"))
    spec = json.loads((planner / "planner.json").read_text())
    spec["fixed"]["family"] = "mymodule:factory"
    (planner / "planner.json").write_text(json.dumps(spec))
    _rehash(planner)
    with pytest.raises(PlannerError, match=r"fixed\.family must be one of linear, mlp"):
        Planner.load(planner)
    code, _, err = cli(["verify", str(planner)], capsys)
    assert code == 2 and err.count("\n") == 1 and "fixed.family" in err, err


def test_export_refuses_a_user_policy_family(tmp_path: Path, capsys) -> None:
    options = {**WORLDS["cartpole-linear"], "policy": "test_export_gym:copied_linear"}
    run(parse_config(_config(options)), tmp_path / "run", progress=False)
    code, _, err = cli(["export", str(tmp_path / "run"), "--out", str(tmp_path / "p")], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "refusing to export" in err and "'test_export_gym:copied_linear'" in err
    assert "linear, mlp" in err
    assert not (tmp_path / "p").exists()
