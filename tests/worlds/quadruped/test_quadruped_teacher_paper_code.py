"""The look-ahead teacher in `variant: paper-code`: its own candidates and look-ahead, the
goal in the world frame, the variant's episode and cost rule, and what it walks."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco")

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.distill import candidate_etas, label_episode
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.paper_code import paper_code_cost
from pacplan.worlds.quadruped.rollout import fixed_gait_controller
from pacplan.worlds.quadruped.teacher import (
    BEST_CONSTANT_GAIT,
    PAPER_CODE_TEACHER,
    QuadrupedTeacher,
    TeacherConfig,
    teacher_config,
)

PAPER = {"variant": "paper-code", "physics": "mujoco"}
SMALL = TeacherConfig(candidates=PAPER_CODE_TEACHER.candidates[::6], lookahead=2)


def test_the_variant_picks_its_teacher() -> None:
    world = QuadrupedWorld(**PAPER, horizon_s=1.0)
    teacher = QuadrupedTeacher(world)
    assert teacher.config is PAPER_CODE_TEACHER is teacher_config("paper-code")
    assert teacher.config.lookahead == 4 and len(teacher.config.candidates) == 18
    assert {g.omega for g in teacher.config.candidates} == {20.0, 30.0, 40.0}
    assert teacher_config("text") == TeacherConfig()
    assert QuadrupedTeacher(QuadrupedWorld(physics="mujoco", robot="derpy")).config == \
        TeacherConfig()
    world.close()


def test_every_candidate_is_a_gait_the_student_can_output() -> None:
    """The distillation's targets: each candidate's η maps back to (nearly) that gait."""
    etas = candidate_etas(PAPER_CODE_TEACHER)
    for eta, gait in zip(etas, PAPER_CODE_TEACHER.candidates, strict=True):
        back = GaitParams.from_policy_output(eta)
        assert abs(back.a1 - gait.a1) < 0.01 and abs(back.a2 - gait.a2) < 0.01
        assert abs(back.omega - gait.omega) < 0.1


@pytest.mark.parametrize("physics", ["mujoco", "bullet"])
def test_episode_is_the_variants_and_replays_bit_for_bit(physics: str) -> None:
    """Four 0.25 s primitives: one decision per primitive, the goal at x = 6 m in the world
    frame (a look-ahead scores min(x, 6) − x_now), the paper code's cost of the episode it
    drives, and its gaits replayed blind give that cost and end point to the bit (the
    look-ahead leaves no trace in the simulator), in MuJoCo and in PyBullet alike."""
    world = QuadrupedWorld(**{**PAPER, "physics": physics}, horizon_s=1.0)
    teacher = QuadrupedTeacher(world, SMALL)
    walked = teacher.rollout(9_700_003)
    res = walked.result
    assert len(walked.decisions) == res.primitives == 4
    assert [d.primitive for d in walked.decisions] == [0, 1, 2, 3]
    assert res.cost == paper_code_cost(res.x_at_primitive_start[-1], 6.0, res.finished)[0]
    assert all(np.isfinite(d.scores).all() and (d.scores < 6.0).all() for d in walked.decisions)
    gaits = iter(res.gaits)
    replay = world.run(lambda depth, proprio: next(gaits), 9_700_003)
    assert replay.cost == res.cost and replay.dx == res.dx
    # the labels the distillation stores are the same episode's
    data, cost = label_episode(world, teacher, 9_700_003)
    assert cost == res.cost and len(data) == 4
    assert np.array_equal(data.scores, np.stack([d.scores for d in walked.decisions]))
    world.close()


def test_bullet_snapshot_restores_bit_for_bit_in_the_text_world() -> None:
    """The text world's gait phase carries over between primitives: the snapshot keeps it, so
    A, restore, B, restore, A repeats A to the bit; a snapshot from before a reset is
    refused."""
    world = QuadrupedWorld(physics="bullet", robot="derpy")
    sim = world.sim
    sim.reset(world.terrain(9_470_003))
    a, b = GaitParams(1.0, 0.6, 0.0, 30.0), BEST_CONSTANT_GAIT
    sim.run_primitive(b, 0.5)
    snap = sim.snapshot()

    def after(gait: GaitParams) -> tuple[np.ndarray, ...]:
        sim.run_primitive(gait, 0.5)
        sim.run_primitive(b, 0.5)
        q, qd = sim.motor_state()
        return (*sim.torso_pose(), q, qd, np.array([sim.step_count, sim._phase]))

    first = after(a)
    sim.restore(snap)
    other = after(b)
    sim.restore(snap)
    again = after(a)
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))
    assert not np.array_equal(first[0], other[0])
    sim.reset(world.terrain(9_470_004))
    with pytest.raises(PacplanError, match="another model or terrain"):
        sim.restore(snap)
    world.close()


@pytest.mark.slow
def test_the_teacher_walks_further_than_the_best_constant_gait() -> None:
    """Full 5 s episodes on 4 terrains (seeds 9,700,000-9,700,003; measured: the teacher
    0, 0, 0, 0.12): it falls on none and costs less than half the best constant gait."""
    world = QuadrupedWorld(**PAPER)
    seeds = range(9_700_000, 9_700_004)
    taught = [QuadrupedTeacher(world).walk(s) for s in seeds]
    gait = [world.run(fixed_gait_controller(BEST_CONSTANT_GAIT), s) for s in seeds]
    world.close()
    assert not any(t.fell for t in taught)
    assert sum(t.finished for t in taught) >= 3
    assert np.mean([t.cost for t in taught]) < 0.5 * np.mean([g.cost for g in gait])
