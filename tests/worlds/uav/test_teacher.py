"""The privileged teacher against oracles: the simulator's own sweep kernel (bit for bit), brute
force over the last primitives, and replays of its plans in the batched world and in PyBullet."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from pacplan.errors import PacplanError
from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import raycast, spec
from pacplan.worlds.uav import teacher as tch
from pacplan.worlds.uav.batched import BatchedSimulator
from pacplan.worlds.uav.scene import sample_scene
from pacplan.worlds.uav.teacher import IX_MAX, IZ_MAX

SEEDS = np.arange(300_000, 300_003)


@pytest.fixture(scope="module")
def lattice() -> tch.Lattice:
    return tch.solve(SEEDS)


@pytest.fixture(scope="module")
def sim() -> BatchedSimulator:
    return BatchedSimulator()


def _full_sweeps(seed: int, step: int, ix: np.ndarray, iz: np.ndarray, prim: np.ndarray
                 ) -> np.ndarray:
    """First colliding checks from the batched simulator's kernel on all 20 cylinders."""
    sim = BatchedSimulator()
    st = sim.scene_tensors([sample_scene(seed)])
    pos = torch.as_tensor(dyn.grid_to_position(np.full(len(ix), step), ix, iz))
    env = torch.zeros(len(ix), dtype=torch.long)
    disp = torch.as_tensor(np.array(dyn.CHECK_DISP))[torch.as_tensor(prim)]
    return raycast.sweep_kernel(st, env, pos, disp).numpy()


def test_sampled_sweeps_equal_the_simulator_kernel(lattice: tch.Lattice) -> None:
    """2,000 random (state, primitive) pairs of every step: the simulator's first colliding
    check, bit for bit (the oracle: raycast.sweep_kernel on the whole scene)."""
    rng = np.random.default_rng(3)
    for e, seed in enumerate(SEEDS[:2]):
        step = rng.integers(0, 12, 1000)
        ix = np.clip(rng.integers(-IX_MAX, IX_MAX + 1, 1000), -2 * step, 2 * step)
        iz = np.clip(rng.integers(-IZ_MAX, IZ_MAX + 1, 1000), -2 * step, 2 * step)
        p = rng.integers(0, 25, 1000)
        for s in range(12):
            m = step == s
            want = _full_sweeps(int(seed), s, ix[m], iz[m], p[m])
            assert np.array_equal(lattice.first[e, s, ix[m] + IX_MAX, iz[m] + IZ_MAX, p[m]], want)


@pytest.mark.slow
def test_sweeps_equal_the_simulator_kernel_bit_for_bit(lattice: tch.Lattice) -> None:
    """Culled tables and the unrolled kernel give the simulator's first colliding check on
    every (state, primitive) of several steps of the lattice (the oracle: raycast.sweep_kernel
    on the whole scene)."""
    outcomes = set()
    for e, seed in enumerate(SEEDS[:2]):
        for step in (0, 3, 7, 11):
            rx, rz = min(2 * step, IX_MAX), min(2 * step, IZ_MAX)
            ix, iz, p = (a.ravel() for a in np.meshgrid(np.arange(-rx, rx + 1),
                                                        np.arange(-rz, rz + 1),
                                                        np.arange(25), indexing="ij"))
            want = _full_sweeps(int(seed), step, ix, iz, p)
            got = lattice.first[e, step, ix + IX_MAX, iz + IZ_MAX, p]
            assert np.array_equal(got, want), (seed, step)
            outcomes |= set(np.unique(want > 0).tolist())
    assert outcomes == {False, True}  # both outcomes are exercised


def test_clearance_is_the_exact_distance_minus_radius() -> None:
    """Clearance of free sweeps = min over checks of the exact point-to-surface distance
    (scene.point_cylinder_distance and the tunnel planes), minus the robot radius."""
    from pacplan.worlds.uav.scene import point_cylinder_distance

    lat = tch.solve([300_001], clear_cap=10.0)
    sc = sample_scene(300_001)
    rng = np.random.default_rng(0)
    free = np.argwhere(lat.first[0, 5] == 0)
    for i, k, p in free[rng.permutation(len(free))[:40]]:
        pts = dyn.grid_to_position(5, i - IX_MAX, k - IZ_MAX) + dyn.CHECK_DISP[p]
        d = np.minimum(point_cylinder_distance(pts, sc.centres, sc.axes, sc.radii).min(1),
                       np.minimum(spec.WALL_X - np.abs(pts[:, 0]),
                                  np.minimum(pts[:, 2], spec.CEIL_Z - pts[:, 2])))
        assert lat.clear[0, 5, i, k, p] == pytest.approx(d.min() - spec.ROBOT_RADIUS, abs=1e-5)


@pytest.mark.slow
def test_cost_to_go_matches_brute_force_over_the_last_two_primitives(
        lattice: tch.Lattice, sim: BatchedSimulator) -> None:
    """At step 10 every one of the 625 two-primitive endings is flown by the simulator's sweep;
    the best cost among them is the program's value of the state."""
    checked = 0
    for e, seed in enumerate(SEEDS[:3]):
        st = sim.scene_tensors([sample_scene(int(seed))])
        states = np.argwhere(lattice.first[e, 9] == 0)[:6]  # cells some primitive leaves free
        for i, k, p in states:
            ix0, iz0 = i - IX_MAX + p // 5 - 2, k - IZ_MAX + p % 5 - 2
            best = 1.0
            for a, b in itertools.product(range(25), range(25)):
                pos = torch.as_tensor(dyn.grid_to_position(10, ix0, iz0)[None])
                fa = int(sim.sweep(st, torch.zeros(1, dtype=torch.long), pos,
                                   torch.tensor([a]))[0])
                if fa:
                    best = min(best, 1 - (200 + fa) / 240)
                    continue
                pos2 = torch.as_tensor(dyn.grid_to_position(11, ix0 + a // 5 - 2,
                                                            iz0 + a % 5 - 2)[None])
                fb = int(sim.sweep(st, torch.zeros(1, dtype=torch.long), pos2,
                                   torch.tensor([b]))[0])
                best = min(best, 1 - (220 + fb) / 240 if fb else 0.0)
            assert lattice.cost[e, 10, ix0 + IX_MAX, iz0 + IZ_MAX] == pytest.approx(best)
            checked += 1
    assert checked >= 6


def test_plans_replayed_in_the_batched_world_cost_what_the_program_says(
        lattice: tch.Lattice, sim: BatchedSimulator) -> None:
    plan = lattice.plan()
    res = sim.rollout(np.zeros((1, spec.POLICY_DIM), np.float32), SEEDS, forced=plan[:, None])
    assert np.array_equal(res.costs[:, 0], lattice.cost[:, 0, IX_MAX, IZ_MAX])
    assert np.array_equal(res.prims[:, 0], np.where(res.prims[:, 0] >= 0, plan, -1))
    greedy = lattice.greedy()
    res_g = sim.rollout(np.zeros((1, spec.POLICY_DIM), np.float32), SEEDS, forced=greedy[:, None])
    assert (res_g.costs[:, 0] >= res.costs[:, 0]).all()  # the program is optimal


def test_plans_replayed_in_pybullet_match(lattice: tch.Lattice) -> None:
    """The second simulator (PyBullet, no shared geometry code) flies the plans identically."""
    from pacplan.worlds.uav.bullet import BulletSimulator

    plan = lattice.plan()[:3]
    bullet = BulletSimulator()
    try:
        res = bullet.rollout(np.zeros((1, spec.POLICY_DIM), np.float32), SEEDS[:3],
                             forced=plan[:, None])
    finally:
        bullet.close()
    assert np.array_equal(res.costs[:, 0], lattice.cost[:3, 0, IX_MAX, IZ_MAX])


def test_program_beats_every_random_sequence(lattice: tch.Lattice, sim: BatchedSimulator) -> None:
    rng = np.random.default_rng(1)
    seqs = rng.integers(0, 25, size=(len(SEEDS), 64, 12))
    res = sim.rollout(np.zeros((64, spec.POLICY_DIM), np.float32), SEEDS, forced=seqs)
    assert (res.costs.min(1) >= lattice.cost[:, 0, IX_MAX, IZ_MAX]).all()


def test_refuses_other_worlds_and_overlapping_seeds_in_one_line() -> None:
    with pytest.raises(PacplanError, match="only in the uav world, not 'quadruped'"):
        tch.check_teacher_request("quadruped", (0, 10))
    with pytest.raises(PacplanError, match=r"overlap cert seeds \[100000, 104000\)") as exc:
        tch.check_teacher_request("uav", (99_000, 100_001), {"cert": (100_000, 104_000),
                                                             "test": (200_000, 205_000)})
    assert "\n" not in str(exc.value)
    tch.check_teacher_request("uav", (0, 100_000), {"cert": (100_000, 104_000)})


def test_labels_only_living_states(lattice: tch.Lattice) -> None:
    with pytest.raises(PacplanError, match="ix 10"):
        lattice.q(np.array([0]), np.array([3]), np.array([10]), np.array([0]))


def test_fast_plans_are_optimal_and_the_world_flies_them(lattice: tch.Lattice) -> None:
    """`plans` (depth-first search) reaches the program's optimum; `planner: teacher` flies
    them in the batched world (every policy column the same)."""
    from pacplan.worlds.uav import UAVWorld

    seq = tch.plans(SEEDS)
    sim = BatchedSimulator()
    res = sim.rollout(np.zeros((1, spec.POLICY_DIM), np.float32), SEEDS, forced=seq[:, None])
    assert np.array_equal(res.costs[:, 0], lattice.cost[:, 0, IX_MAX, IZ_MAX])
    costs = UAVWorld(planner="teacher", compile=False).costs(
        np.zeros((2, spec.POLICY_DIM), np.float32), SEEDS)
    assert np.array_equal(costs, np.repeat(res.costs, 2, 1))


@pytest.mark.slow
def test_no_free_path_falls_back_to_the_full_program() -> None:
    """A wall of cylinders across the tunnel: no collision-free path exists, the search says so
    and the full program's best (latest) collision is returned."""
    from uav_helpers import scene_with

    wall = [((x, 6.0, 0.0), (0.0, 0.0, 1.0), 0.3) for x in np.arange(-4.5, 4.6, 0.5)]
    scene = scene_with(wall)
    assert tch._free_path(scene, 0.75) is None
    lat = tch.solve([0], scenes=[scene])
    assert 0 < lat.cost[0, 0, IX_MAX, IZ_MAX] < 1
