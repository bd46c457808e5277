"""Full-length quadruped rollouts (10 s simulated each): run with `pytest -m slow`."""

from __future__ import annotations

import numpy as np
import pytest

from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout
from pacplan.worlds.quadruped.terrain import sample_terrain

pytestmark = pytest.mark.slow

STRAIGHT = GaitParams(a1=0.5, a2=0.5, a_st=0.0, omega=30.0)


def test_full_rollout_same_seed_same_cost() -> None:
    theta = np.random.default_rng(5).normal(0, 0.05, (1, POLICY_DIM)).astype(np.float32)
    a = QuadrupedWorld().costs(theta, np.array([21, 22]))
    b = QuadrupedWorld().costs(theta, np.array([22, 21]))
    np.testing.assert_array_equal(a, b[::-1])
    assert np.all((a >= 0) & (a <= 1))


def _reference_gait(slope: float, plank: float) -> np.ndarray:
    """Costs of the open-loop reference gait on terrains 0-3, each rollout's rules checked."""
    world = QuadrupedWorld(max_slope_deg=slope, plank_length=plank)
    results = [
        rollout(
            world.sim,
            sample_terrain(seed, slope, plank),
            fixed_gait_controller(STRAIGHT),
            needs_depth=False,
        )
        for seed in range(4)
    ]
    costs = np.array([r.cost for r in results])
    assert np.all((costs >= 0) & (costs <= 1))
    for r in results:
        assert r.sim_time <= 10.0 + 1e-9
        assert r.fell or r.finished or r.sim_time == pytest.approx(10.0)
    return costs


def test_reference_gait_is_hard_but_passable() -> None:
    """At the paper's 23.3° the open-loop gait makes real progress yet does not simply finish."""
    assert _reference_gait(23.3, 0.5).mean() < 0.9  # it walks


def test_reference_gait_stalls_on_the_hard_terrain() -> None:
    """On the Derpy (the paper's robot) the open-loop gait does not climb 35° ridges of 0.25 m
    planks: mean cost 0.986 on terrains 0-3 (the earlier minitaur.urdf robot walked there).
    quadruped-hard needs a planner that adapts; the reference gait is no yardstick for it."""
    hard = _reference_gait(35.0, 0.25)
    assert hard.mean() > 0.9
    assert hard.mean() > _reference_gait(23.3, 0.5).mean()


def _costs_in_worker(args: tuple[dict, np.ndarray, np.ndarray]) -> np.ndarray:
    from pacplan.worlds import make_world

    options, thetas, seeds = args
    return make_world("quadruped", **options).costs(thetas, seeds)


def test_costs_identical_in_a_worker_process() -> None:
    """Workers rebuild the world from (name, options) and must reproduce costs bit for bit."""
    import multiprocessing as mp

    options = {"max_slope_deg": 35.0, "horizon_s": 2.0}
    thetas = np.random.default_rng(8).normal(0, 0.1, (2, POLICY_DIM)).astype(np.float32)
    seeds = np.array([3, 30], dtype=np.int64)
    here = QuadrupedWorld(**options).costs(thetas, seeds)
    with mp.get_context("spawn").Pool(1) as pool:
        there = pool.map(_costs_in_worker, [(options, thetas, seeds)])[0]
    np.testing.assert_array_equal(here, there)


def test_quick_preset_shrunk_runs_end_to_end(tmp_path) -> None:
    """The quadruped-quick preset, shrunk to 2 policies on 4 + 2 terrains: the shipped prior,
    its policies, the reference-gait baseline row and a certificate that verifies."""
    from pacplan.config import load_config
    from pacplan.pipeline.pipeline import run
    from pacplan.pipeline.provenance import verify_certificate as verify
    from pacplan.presets import preset_path
    from pacplan.report.document import write_report
    from pacplan.worlds.quadruped.policy import gait_theta

    cfg = load_config(preset_path("quadruped-quick"))
    cfg.policies.m = 2
    cfg.certificate.n = [4]
    cfg.seeds.cert = (100000, 100004)
    cfg.seeds.test = (200000, 200002)
    cfg.report.trajectories = 0
    run(cfg, tmp_path, progress=False)
    c = verify(tmp_path / "certificate.json")
    assert c.n == 4 and c.m == 2 and c.test_n == 2 and c.certified >= c.emp_cost
    # the baseline row is the reference gait, rolled out by the world itself
    row = np.load(tmp_path / "costs" / "baseline-reference-gait.npy")
    world = QuadrupedWorld(max_slope_deg=23.3)
    theta = gait_theta(STRAIGHT).astype(np.float32)[None, :]
    np.testing.assert_array_equal(row, world.costs(theta, np.array([200000, 200001])))
    assert "baseline: reference-gait" in write_report(tmp_path).read_text()
