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


@pytest.mark.parametrize(("slope", "plank"), [(23.3, 0.5), (35.0, 0.25)])
def test_reference_gait_is_hard_but_passable(slope: float, plank: float) -> None:
    """The open-loop gait makes real progress on rough terrain yet does not trivially finish."""
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
    assert costs.mean() < 0.9  # it walks
    for r in results:
        assert r.sim_time <= 10.0 + 1e-9
        assert r.fell or r.finished or r.sim_time == pytest.approx(10.0)


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
