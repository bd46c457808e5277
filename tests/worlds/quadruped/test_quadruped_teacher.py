"""The privileged quadruped teacher: exact save/restore, determinism, its cost is the world's,
it walks where the best constant gait falls, and what it refuses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")

from helpers import load_script
from pacplan.errors import PacplanError
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.mujoco_sim import MujocoMinitaurSim
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout
from pacplan.worlds.quadruped.teacher import (
    BEST_CONSTANT_GAIT,
    DEFAULT_CANDIDATES,
    QuadrupedTeacher,
    TeacherConfig,
    check_teacher_request,
    check_teacher_world,
)

MUJOCO = {"physics": "mujoco", "robot": "derpy"}
# A small teacher for the fast tests: 3 candidates, 2-primitive look-ahead.
SMALL = TeacherConfig(candidates=DEFAULT_CANDIDATES[::5], lookahead=2)
BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "quadruped_teacher.py"


@pytest.fixture(scope="module")
def short_world() -> Iterator[QuadrupedWorld]:
    """The default world cut to 1.5 s (3 primitives), for the cheap tests."""
    w = QuadrupedWorld(**MUJOCO, horizon_s=1.5)
    yield w
    w.close()


def _full_state(sim: MujocoMinitaurSim) -> tuple[np.ndarray, ...]:
    d = sim.data
    return (d.qpos.copy(), d.qvel.copy(), d.act.copy(), d.qacc_warmstart.copy(),
            d.ctrl.copy(), np.array([d.time, sim.step_count, sim._phase]))


def test_snapshot_restores_bit_for_bit(short_world: QuadrupedWorld) -> None:
    """Run A, restore, run B, restore, run A again: the same states, bit for bit (the warm
    start included), and restore puts back exactly what snapshot found."""
    sim = short_world.sim
    sim.reset(short_world.terrain(9_470_003))
    a, b = GaitParams(1.0, 0.6, 0.0, 30.0), BEST_CONSTANT_GAIT
    sim.run_primitive(b, 0.5)
    before = _full_state(sim)
    snap = sim.snapshot()
    sim.run_primitive(a, 0.5)
    sim.run_primitive(b, 0.5)
    first = _full_state(sim)
    sim.restore(snap)
    for x, y in zip(_full_state(sim), before, strict=True):
        assert np.array_equal(x, y)
    sim.run_primitive(b, 0.5)
    assert not np.array_equal(_full_state(sim)[0], first[0])
    sim.restore(snap)
    sim.run_primitive(a, 0.5)
    sim.run_primitive(b, 0.5)
    for x, y in zip(_full_state(sim), first, strict=True):
        assert np.array_equal(x, y)


def test_restore_refuses_another_terrain(short_world: QuadrupedWorld) -> None:
    sim = short_world.sim
    sim.reset(short_world.terrain(9_470_003))
    snap = sim.snapshot()
    sim.reset(short_world.terrain(9_470_004))
    with pytest.raises(PacplanError, match="another model or terrain") as e:
        sim.restore(snap)
    assert "\n" not in str(e.value)


def test_teacher_rollout_deterministic_and_its_cost_is_the_worlds(
        short_world: QuadrupedWorld) -> None:
    """Same terrain, same cost and choices, bit for bit, also from a fresh world; and the
    teacher's gaits replayed blind through the same rollout give the same cost bit for bit:
    the look-ahead leaves no trace, and the cost is the world's."""
    teacher = QuadrupedTeacher(short_world, SMALL)
    one = teacher.rollout(9_470_003)
    two = teacher.rollout(9_470_003)
    other = QuadrupedWorld(**MUJOCO, horizon_s=1.5)
    three = QuadrupedTeacher(other, SMALL).rollout(9_470_003)
    other.close()
    assert one.result.primitives == 3 and len(one.decisions) == 3
    for r in (two, three):
        assert r.result.cost == one.result.cost
        assert r.result.gaits == one.result.gaits
        for d1, d2 in zip(r.decisions, one.decisions, strict=True):
            assert np.array_equal(d1.scores, d2.scores) and d1.choice == d2.choice
    gaits = iter(one.result.gaits)
    replay = rollout(short_world.sim, short_world.terrain(9_470_003),
                     lambda depth, proprio: next(gaits), short_world.rollout_config,
                     needs_depth=False)
    assert replay.cost == one.result.cost and replay.dx == one.result.dx
    # the choice is the argmax of the scores (the first of equals)
    assert [d.choice for d in one.decisions] == [int(np.argmax(d.scores))
                                                 for d in one.decisions]


def test_teacher_costs_stop_at_a_finish_and_choose_the_same() -> None:
    """`costs` keeps no decisions, so a look-ahead that finishes ends the search: on a terrain
    the teacher finishes, the same cost to the bit with fewer simulated primitives (about a
    fifth fewer when measured), and the recorded rollout's scores are all finite."""
    world = QuadrupedWorld(**MUJOCO)
    teacher = QuadrupedTeacher(world)
    sim, calls = world.sim, [0]
    run_primitive = sim.run_primitive

    def counted(*args: object, **kwargs: object) -> object:
        calls[0] += 1
        return run_primitive(*args, **kwargs)

    sim.run_primitive = counted  # type: ignore[method-assign]
    recorded = teacher.rollout(9_470_010)
    with_scores, calls[0] = calls[0], 0
    cost = teacher.costs(np.array([9_470_010]))
    world.close()
    assert recorded.result.finished
    assert cost[0] == recorded.result.cost
    assert calls[0] < with_scores
    assert all(np.isfinite(d.scores).all() for d in recorded.decisions)


# Terrains (23.3°) where the best constant gait falls within 3 s and the default teacher,
# cut to the same 3 s, walks on: found by a scan of seeds 9,470,000–9,470,059 (the teacher
# costs 0.18 and 0.09 there, the gait 0.53 and 0.48).
FALLS_IN_3S = (9_470_012, 9_470_038)


def test_teacher_walks_where_the_constant_gait_falls() -> None:
    world = QuadrupedWorld(**MUJOCO, horizon_s=3.0)
    teacher = QuadrupedTeacher(world)
    for seed in FALLS_IN_3S:
        gait = rollout(world.sim, world.terrain(seed), fixed_gait_controller(BEST_CONSTANT_GAIT),
                       world.rollout_config, needs_depth=False)
        taught = teacher.rollout(seed).result
        assert gait.fell
        assert not taught.fell
        assert taught.cost < gait.cost - 0.1
    world.close()


@pytest.mark.slow
def test_teacher_full_episodes_where_the_shipped_gait_falls() -> None:
    """Full 10 s episodes on terrains where the shipped best-constant-gait net falls (seeds
    from benchmarks/quadruped_teacher.py's rows): the teacher falls on none and finishes
    nearly everywhere."""
    from safetensors.numpy import load_file

    bench = load_script(BENCH)
    world = QuadrupedWorld(**bench.OPTIONS)
    theta = load_file(str(bench.GAIT))["theta"]
    teacher = QuadrupedTeacher(world)
    seeds = (9_470_001, 9_470_002, 9_470_003, 9_470_005)
    gait = [world.rollout(theta, s) for s in seeds]
    taught = [teacher.rollout(s).result for s in seeds]
    world.close()
    assert all(g.fell for g in gait)
    assert not any(t.fell for t in taught)
    assert sum(t.finished for t in taught) >= 3
    assert np.mean([t.cost for t in taught]) < 0.5 * np.mean([g.cost for g in gait])


@pytest.mark.parametrize("options, match", [
    ({"physics": "bullet", "robot": "minitaur"}, "robot 'derpy', not 'minitaur'"),
    ({"physics": "mujoco", "robot": "minitaur"}, "robot 'derpy', not 'minitaur'"),
])
def test_teacher_refuses_worlds_it_cannot_see(options: dict, match: str) -> None:
    world = QuadrupedWorld(**options)
    with pytest.raises(PacplanError, match=match) as e:
        QuadrupedTeacher(world)
    assert "\n" not in str(e.value)
    assert world._sim is None  # refused before any simulator was opened


def test_planner_teacher_world_walks_the_teacher(short_world: QuadrupedWorld) -> None:
    """`planner: teacher` (a run's baseline row): every column is the teacher's own episode
    on that terrain, whatever θ, to the bit."""
    world = QuadrupedWorld(**MUJOCO, horizon_s=1.5, planner="teacher")
    seeds = np.array([9_470_003, 9_470_012])
    thetas = np.random.default_rng(0).normal(0.0, 0.1, (3, world.policy_dim()))
    got = world.costs(thetas, seeds)
    world.close()
    teacher = QuadrupedTeacher(short_world)
    want = [teacher.rollout(int(s)).result.cost for s in seeds]
    assert got.shape == (2, 3)
    assert (got == np.array(want)[:, None]).all()
    assert world.costs(thetas[:0], seeds).shape == (2, 0)
    assert world.rollout(thetas[1], int(seeds[0])).cost == want[0]


@pytest.mark.parametrize("options, match", [
    ({"planner": "oracle"}, "planner must be one of policy, teacher, got 'oracle'"),
    ({"planner": "teacher", "physics": "mujoco", "robot": "minitaur"}, "not 'minitaur'"),
])
def test_planner_teacher_refused_where_it_cannot_see(options: dict, match: str) -> None:
    with pytest.raises(PacplanError, match=match) as e:
        QuadrupedWorld(**options)
    assert "\n" not in str(e.value)


def test_teacher_refuses_a_variant_or_engine_it_was_not_made_for() -> None:
    with pytest.raises(PacplanError, match="variants text, paper-code, not variant 'upside'"):
        check_teacher_world("quadruped", {"variant": "upside", "physics": "mujoco"})
    with pytest.raises(PacplanError, match="mujoco, bullet\\), not physics 'ode'"):
        check_teacher_world("quadruped", {"physics": "ode"})


def test_teacher_refuses_the_uav() -> None:
    from pacplan.worlds.uav import UAVWorld

    with pytest.raises(PacplanError, match="only in the quadruped world, not 'uav'") as e:
        QuadrupedTeacher(UAVWorld())
    assert "\n" not in str(e.value)
    with pytest.raises(PacplanError, match="not 'toy'"):
        check_teacher_world("toy")


def test_teacher_refuses_cert_and_test_seeds() -> None:
    forbidden = {"cert": (100_000, 104_000), "test": (200_000, 201_000)}
    check_teacher_request("quadruped", MUJOCO, (0, 100_000), forbidden)  # prior seeds: fine
    for seeds, role in (((103_990, 104_010), "cert"), ((199_000, 200_001), "test")):
        with pytest.raises(PacplanError, match=f"overlap {role} seeds") as e:
            check_teacher_request("quadruped", MUJOCO, seeds, forbidden)
        assert "\n" not in str(e.value)
    with pytest.raises(PacplanError, match="not 'minitaur'"):
        check_teacher_request("quadruped", {"robot": "minitaur"}, (0, 10), forbidden)


def test_teacher_config_refusals() -> None:
    for kwargs in ({"candidates": ()}, {"lookahead": 0}, {"fall_penalty_m": -1.0},
                   {"heading_penalty_m": float("nan")}):
        with pytest.raises(PacplanError):
            TeacherConfig(**kwargs)


def test_benchmark_refuses_preset_seeds(capsys: pytest.CaptureFixture[str]) -> None:
    """The benchmark's held-out terrains must miss every shipped quadruped preset's seeds."""
    bench = load_script(BENCH)
    ranges = bench.preset_seed_ranges()
    assert ranges["quadruped-paper cert"] == (100_000, 104_000)
    assert ranges["quadruped-prior prior_eval"] == (300_000, 300_500)
    with pytest.raises(SystemExit, match=r"overlap quadruped-\S+ test seeds"):
        bench.main(["--terrains", "5", "--first-seed", "200995", "--rows", "/nonexistent/x"])
