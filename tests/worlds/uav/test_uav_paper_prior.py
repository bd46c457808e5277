"""The paper's UAV weights mapped into pacplan's policy (`paper_prior`) score and fly exactly as
a direct implementation of the paper's scoring does: its net on depth in metres, × 1000, outputs
in image-grid order, plus its Depth Filter (the mean of each 5 × 5 cell of depth[9:34, 13:38]),
the best grid cell r, c flying primitive |4 − r| + 5c. The oracle is written here from the
paper's description with torch.nn.functional, sharing no code with pacplan's net."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from pacplan.errors import PacplanError
from pacplan.worlds.uav import UAVWorld, spec
from pacplan.worlds.uav import paper_prior as pp
from pacplan.worlds.uav import policy as pol
from pacplan.worlds.uav.batched import BatchedScene
from pacplan.worlds.uav.policy import FilterCells
from pacplan.worlds.uav.scene import sample_scene

SEEDS = [3, 11, 400_000, 400_007]


def _paper_layers(theta: np.ndarray) -> dict[str, torch.Tensor]:
    shapes = [(2, 1, 4, 4), (2,), (1, 2, 2, 2), (1,), (25, 529), (25,), (25, 25), (25,)]
    names = ["c1w", "c1b", "c2w", "c2b", "f1w", "f1b", "f2w", "f2b"]
    out, i = {}, 0
    t = torch.as_tensor(np.asarray(theta, np.float32))
    for name, shape in zip(names, shapes, strict=True):
        n = int(np.prod(shape))
        out[name] = t[i : i + n].reshape(shape)
        i += n
    assert i == t.numel()
    return out


def paper_scores(depth_m: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """(25,) the paper's scores in ITS order (output 5r + c) for one 50 × 50 depth image."""
    w = _paper_layers(theta)
    x = torch.as_tensor(depth_m, dtype=torch.float32)[None, None]
    h = F.elu(F.conv2d(x, w["c1w"], w["c1b"], stride=2))
    h = F.elu(F.conv2d(h, w["c2w"], w["c2b"], stride=1))
    h = F.elu(F.linear(h.flatten(1), w["f1w"], w["f1b"]))
    net = 1e3 * torch.tanh(F.linear(h, w["f2w"], w["f2b"]))[0]
    grid = x[0, 0, 9:34, 13:38].reshape(5, 5, 5, 5).mean(dim=(1, 3)).reshape(25)
    return (net + grid).numpy()


def paper_choice(depth_m: np.ndarray, theta: np.ndarray) -> int:
    """pacplan's index of the primitive the paper flies: |4 − r| + 5c for the best cell."""
    k = int(np.argmax(paper_scores(depth_m, theta)))
    r, c = divmod(k, 5)
    return abs(4 - r) + 5 * c


def paper_flight(seed: int, theta: np.ndarray) -> tuple[list[int], int]:
    """Primitives flown and first colliding check, choosing with `paper_choice` on depth images
    rendered by pacplan's ray caster and sweeping each primitive with its collision check."""
    scene = BatchedScene()
    scene.load(sample_scene(seed))
    pos = np.array(spec.START, dtype=np.float64)
    offsets = spec.primitive_offsets()
    flown: list[int] = []
    for step in range(spec.N_STEPS):
        prim = paper_choice(scene.render(pos), theta)
        flown.append(prim)
        first = scene.sweep(pos, prim)
        if first:
            return flown, step * spec.CHECKS_PER_PRIM + first
        pos = pos + np.array([offsets[prim, 0], spec.SPEED, offsets[prim, 1]])
    return flown, 0


def _random_paper_weights(n: int) -> np.ndarray:
    """Paper-layout weights whose net outputs are mostly not saturated (scores differ by more
    than the Depth Filter's 20 m), so the permutation and the metre scaling both matter."""
    rng = np.random.default_rng(5)
    th = rng.normal(0.0, 0.2, (n, spec.POLICY_DIM)).astype(np.float32)
    th[:, :32] *= 0.05  # conv1 weights see metres, up to 20
    return th


@pytest.fixture(scope="module")
def paper_thetas(paper_dir: Path) -> np.ndarray:
    """The paper's mean policy and its first two draws, in the paper's layout."""
    mu, logvar = pp.load_paper_prior(paper_dir)
    return np.vstack([mu[None], pp.paper_draws(mu, logvar, 2)])


def _images(seed: int) -> np.ndarray:
    scene = BatchedScene()
    scene.load(sample_scene(seed))
    points = np.array([[0, 0, 2], [0.5, 1.25, 2.5], [-1, 2.5, 1.5], [0, 5, 2], [1.5, 7.5, 3]])
    return scene.render(points.astype(np.float64))


def _pacplan_scores(images: np.ndarray, theta_paper: np.ndarray) -> np.ndarray:
    """pacplan's scores (primitive order) with the mapped weights, scale 1000, paper cells."""
    mapped = pp.to_pacplan(theta_paper[None])
    parts = pol.split_theta(torch.as_tensor(mapped))
    imgs = torch.as_tensor(images)
    cells = FilterCells(top_left=pp.paper_filter_cells())
    net = pol.net_scores_grouped(imgs[:, None], parts)[:, 0]
    return (cells.scores(imgs) + pp.PAPER_NET_SCALE * net).numpy()


def _check_scores(thetas: np.ndarray) -> None:
    perm = pp.grid_to_primitive()
    for seed in SEEDS[:2]:
        images = _images(seed)
        for theta in thetas:
            ours = _pacplan_scores(images, theta)
            for q, image in enumerate(images):
                theirs = np.empty(25)
                theirs[perm] = paper_scores(image, theta)
                np.testing.assert_allclose(ours[q], theirs, rtol=0, atol=2e-3)
                assert pol.choose(torch.as_tensor(ours[q])).item() == paper_choice(image, theta)


def test_grid_order_is_a_permutation_matching_pacplan_geometry() -> None:
    perm = pp.grid_to_primitive()
    assert sorted(perm) == list(range(25))
    assert perm[0] == 4 and perm[4] == 24 and perm[20] == 0 and perm[12] == 12  # corners, centre
    # each primitive's paper cell lies within 2 pixels of the cell pacplan projects for it
    assert np.abs(pp.paper_filter_cells() - spec.filter_cells()).max() <= 2


def test_mapped_random_weights_score_as_the_paper() -> None:
    _check_scores(_random_paper_weights(3))


def test_mapped_paper_prior_scores_as_the_paper(paper_thetas: np.ndarray) -> None:
    _check_scores(paper_thetas)


def _fly_both(thetas: np.ndarray, seeds: list[int]) -> None:
    world = UAVWorld(simulator="batched", compile=False, net_scale=pp.PAPER_NET_SCALE)
    world.sim.cells = FilterCells(world.sim.device, pp.paper_filter_cells())
    res = world.rollouts(pp.to_pacplan(thetas), np.array(seeds))
    for i, seed in enumerate(seeds):
        for j, theta in enumerate(thetas):
            flown, checks = paper_flight(seed, theta)
            assert list(res.prims[i, j, : len(flown)]) == flown, (seed, j)
            assert int(res.checks[i, j]) == checks, (seed, j)


def test_mapped_random_weights_fly_as_the_paper() -> None:
    _fly_both(_random_paper_weights(2), [11, 400_007])


def test_mapped_paper_prior_flies_as_the_paper(paper_thetas: np.ndarray) -> None:
    _fly_both(paper_thetas[:1], [3, 400_000])


@pytest.mark.slow
def test_mapped_paper_prior_flies_as_the_paper_more(paper_thetas: np.ndarray) -> None:
    _fly_both(paper_thetas, SEEDS)


def test_paper_draws_follow_the_papers_recipe() -> None:
    mu = np.linspace(-1, 1, spec.POLICY_DIM, dtype=np.float32)
    logvar = np.full(spec.POLICY_DIM, np.log(0.25), np.float32)
    torch.manual_seed(0)  # what the paper's code does before drawing its m policies
    eps = torch.randn((3, spec.POLICY_DIM)).numpy()
    np.testing.assert_allclose(pp.paper_draws(mu, logvar, 3), mu + 0.5 * eps, rtol=1e-6)


def test_load_refuses_wrong_files(tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match="pacplan data paper"):
        pp.load_paper_prior(tmp_path)
    np.save(tmp_path / "mu_quadrotor_best.npy", np.zeros(5, np.float32))
    np.save(tmp_path / "logvar_quadrotor_best.npy", np.zeros(spec.POLICY_DIM, np.float32))
    with pytest.raises(PacplanError, match=r"mu_quadrotor_best\.npy: expected 13943"):
        pp.load_paper_prior(tmp_path)
    with pytest.raises(PacplanError, match="13943 values"):
        pp.to_pacplan(np.zeros((2, 10)))


def test_docs_quote_the_committed_measurement() -> None:
    """docs/results.md (the README's results until 0.2.0), docs/worlds.md and the report's note
    state what the benchmark measured."""
    import json

    from pacplan.worlds.uav.paper_table import NOTE

    repo = Path(__file__).resolve().parents[3]
    data = json.loads((repo / "benchmarks" / "data" / "uav-paper-prior.json").read_text())
    assert data["envs"] >= 2000 and data["draws"] == 50
    mean = f"{100 * data['paper_prior_pacplan_cells']['mean_policy_cost']:.2f} %"
    draws = f"{100 * data['paper_prior_pacplan_cells']['draws_mean_cost']:.2f} %"
    ours = f"{100 * data['pacplan_prior_uav']['mean_policy_cost']:.2f} %"
    worlds = (repo / "docs" / "worlds.md").read_text()
    results = (repo / "docs" / "results.md").read_text()
    for text in (worlds, results, NOTE):
        assert mean in text and draws in text
    assert ours in worlds and ours in results
