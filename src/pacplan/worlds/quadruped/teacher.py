"""A privileged quadruped teacher: it picks each gait by trying the candidates in the simulator.

The student (the 944-weight net) sees a depth image and 22 proprioceptive values; the teacher
sees everything: the terrain and the full simulator state. Walking over ridges is chaotic near a
tip-over, so no model of the terrain predicts a gait's outcome as well as the simulator itself.
At every decision the teacher therefore

1. saves the simulator (`snapshot`: in MuJoCo the whole MjData with the solver's warm start, in
   PyBullet Bullet's `saveState`, each with the step count and the gait phase; restoring it is
   bit for bit),
2. for each candidate gait runs a *look-ahead*: the candidate for one primitive, then
   `lookahead − 1` (default 2) primitives of the best constant gait (a1 0.8, a2 1.0, ω 40),
   the finish line in place, and restores the state after each,
3. scores each look-ahead and returns the best (ties: the first candidate in order); pacplan's
   own `rollout` then runs that gait from the restored state, so the teacher's cost is the
   world's cost of the episode it drives, exactly.

Score of a look-ahead, in metres: forward progress min(x, finish) − x_now at its end, minus
`fall_penalty_m` (10) if it ends in a fall (twice that if the candidate's own primitive falls:
the follow-up is only a guess at what comes next), minus `heading_penalty_m` (0.5) per radian of
heading away from +x and `tilt_penalty_m` (0.5) × (1 − torso up · world up): progress is
measured along x, and a robot turned or tilted at the end of the look-ahead walks the next
primitives worse. A look-ahead that finishes scores the full distance (ties: the first
candidate). When the look-ahead reaches the end of the episode (the horizon), the score is the
progress alone: the episode's cost counts only the displacement, so a fall there costs nothing
more. Why a look-ahead several primitives long: a gait that gains most now can leave the robot
pitched over a crest or turned aside where every next gait loses. Measured while choosing
(seeds 9,470,000–9,470,047): with these weights 2 primitives fell on 1 terrain of 48, 3 on none;
without the heading and tilt terms 2 primitives fell on 1 of 12 (the robot turned 50° in one
primitive that gained the most x, then walked sideways); a one-step teacher fell on a third of
the terrains in an earlier measurement.

The candidates are the sine gait without steering on a grid a1 ∈ {0.6, 0.8, 1.0},
a2 ∈ {0.6, 1.0}, ω ∈ {30, 40} rad/s (12 gaits, the best constant gait among them), all in the
range the policy's output map reaches, so a student can imitate every label. A look-ahead costs
three primitives of simulation, so a decision costs about 36 primitives.

The teacher reads the episode's clock from the simulator: a call at step 0 starts an episode
(the finish line is `finish_dx` ahead of the torso there), and the primitives already run are
`step_count` // steps per primitive (only a final primitive stops early). It runs in either
engine: MuJoCo's snapshot copies the whole MjData, PyBullet's is Bullet's own `saveState` with
the clock and gait phase (`MinitaurSim.snapshot`), and both restore bit for bit (tested: the
teacher's gaits replayed blind give its cost to the bit). It needs the Derpy (the candidates
and scores were chosen and measured on it); anything else is refused in one line, as are
teacher seeds that overlap certification or test seeds.

In `variant: paper-code` (0.25 s primitives, the gait clock at twice simulated time, the goal at
x = 6 m in the world frame) the teacher runs the same search with that variant's episode
(`paper_code_rollout`) and its own candidates (`PAPER_CODE_TEACHER`): ω ∈ {20, 30, 40} (18
gaits: at twice the clock a slower gait is often the one that stays up on a steep tent) and a
look-ahead of 4 primitives (1 s, as the text world's 3 × 0.5 s looks 1.5 s ahead). Measured on
10 MuJoCo paper-code terrains while choosing (shared/notes/quadruped-paper-code-twin.md): 0.019
mean cost against 0.030 with the text world's 12 candidates and 3 primitives.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.validation import check_seeds, check_teacher_seeds
from pacplan.worlds.quadruped.episode import RolloutConfig
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.rollout import Controller, RolloutResult, rollout
from pacplan.worlds.quadruped.scene import DEFAULT_ROBOT

# The best constant gait (scripts/search_quadruped_gait.py; the shipped ES prior's start).
BEST_CONSTANT_GAIT = GaitParams(a1=0.8, a2=1.0, a_st=0.0, omega=40.0)
DEFAULT_CANDIDATES = tuple(GaitParams(a1=a1, a2=a2, a_st=0.0, omega=w)
                           for a1 in (0.6, 0.8, 1.0) for a2 in (0.6, 1.0) for w in (30.0, 40.0))
SUPPORTED_ENGINES = ("mujoco", "bullet")
SUPPORTED_ROBOT = "derpy"
SUPPORTED_VARIANTS = ("text", "paper-code")


@dataclass(frozen=True)
class TeacherConfig:
    """The candidates, the follow-up gait, the look-ahead length and the fall penalty."""

    candidates: tuple[GaitParams, ...] = DEFAULT_CANDIDATES
    follow: GaitParams = BEST_CONSTANT_GAIT
    lookahead: int = 3
    fall_penalty_m: float = 10.0
    heading_penalty_m: float = 0.5
    tilt_penalty_m: float = 0.5

    def __post_init__(self) -> None:
        if not self.candidates:
            raise PacplanError("the teacher needs at least one candidate gait")
        if self.lookahead < 1:
            raise PacplanError(f"lookahead must be >= 1 primitive, got {self.lookahead}")
        for name in ("fall_penalty_m", "heading_penalty_m", "tilt_penalty_m"):
            if not getattr(self, name) >= 0:
                raise PacplanError(f"{name} must be >= 0, got {getattr(self, name)}")


PAPER_CODE_CANDIDATES = tuple(GaitParams(a1=a1, a2=a2, a_st=0.0, omega=w)
                              for a1 in (0.6, 0.8, 1.0) for a2 in (0.6, 1.0)
                              for w in (20.0, 30.0, 40.0))
PAPER_CODE_TEACHER = TeacherConfig(candidates=PAPER_CODE_CANDIDATES, lookahead=4)


def teacher_config(variant: str = "text") -> TeacherConfig:
    """The teacher's settings for a quadruped variant (`variant` is checked by the world)."""
    return PAPER_CODE_TEACHER if variant == "paper-code" else TeacherConfig()


@dataclass(frozen=True)
class Decision:
    """One choice: the primitive index it was made at, every candidate's score, the pick."""

    primitive: int
    scores: np.ndarray
    choice: int


@dataclass
class TeacherRollout:
    """A teacher-driven episode: pacplan's `RolloutResult` and the decisions behind it."""

    result: RolloutResult
    decisions: list[Decision] = field(default_factory=list)


def check_teacher_world(world: str, options: Mapping[str, Any] | None = None) -> None:
    """Refuse, in one line, a world the teacher cannot look ahead in: not the quadruped, an
    engine without a snapshot, a variant it has no settings for or a robot other than the
    Derpy."""
    opts = dict(options or {})
    if world != "quadruped":
        raise PacplanError(f"the quadruped teacher plans only in the quadruped world, not "
                           f"{world!r}")
    variant = opts.get("variant", "text")
    if variant not in SUPPORTED_VARIANTS:
        raise PacplanError(f"the quadruped teacher looks ahead in variants "
                           f"{', '.join(SUPPORTED_VARIANTS)}, not variant {variant!r}")
    engine = opts.get("physics", "bullet")
    if engine not in SUPPORTED_ENGINES:
        raise PacplanError(f"the quadruped teacher looks ahead by saving and restoring the "
                           f"simulator ({', '.join(SUPPORTED_ENGINES)}), not physics {engine!r}")
    robot = opts.get("robot", DEFAULT_ROBOT)
    if robot != SUPPORTED_ROBOT:
        raise PacplanError(f"the quadruped teacher's gaits and scores are made for robot "
                           f"'derpy', not {robot!r}")


def check_teacher_request(world: str, options: Mapping[str, Any] | None,
                          seeds: Sequence[int],
                          forbidden: Mapping[str, Sequence[int] | None] | None = None) -> None:
    """Refuse, in one line and before any work, a world the teacher cannot see or teacher seeds
    [start, stop) that overlap a forbidden role's (certification and test: labels or choices
    made there would void the bound and the test estimate)."""
    check_teacher_world(world, options)
    check_teacher_seeds(seeds, forbidden or {}, "prior-training or held-out")


class QuadrupedTeacher:
    """The look-ahead teacher of a `QuadrupedWorld` (the Derpy, either engine); one thread.

    `rollout(seed)` drives the world's own simulator through pacplan's `rollout`, so its cost
    is what the world charges; `controller(sim)` is the same teacher as a `Controller` for any
    rollout on a simulator of this world.
    """

    def __init__(self, world: Any, config: TeacherConfig | None = None) -> None:
        name = getattr(world, "name", type(world).__name__)
        options = ({"physics": getattr(world, "engine", None),
                    "robot": getattr(world, "robot", None),
                    "variant": getattr(world, "variant", "text")}
                   if name == "quadruped" else {})
        check_teacher_world(str(name), options)
        self.world = world
        self.variant = str(options.get("variant") or "text")
        self.config = config or teacher_config(self.variant)
        self.rollout_config: RolloutConfig = world.rollout_config
        physics = world.physics
        self._steps_per_primitive = round(self.rollout_config.primitive_s / physics.time_step)

    def controller(self, sim: Any, decisions: list[Decision] | None = None) -> Controller:
        """The teacher as a `Controller` of `sim` (a `MujocoMinitaurSim` of this world); its
        observations are ignored: it reads the simulator. Choices are appended to
        `decisions` when given."""
        cfg = self.rollout_config
        x0: list[float | None] = [None]

        # The text world's finish line is finish_dx ahead of the start; paper-code's goal is
        # x = finish_dx in the world frame.
        origin = 0.0 if self.variant == "paper-code" else None

        def control(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
            if sim.step_count == 0:  # a new episode: its clock starts here
                x0[0] = sim.torso_x() if origin is None else origin
            if x0[0] is None:
                raise PacplanError("the teacher joins an episode at its start only (step 0)")
            done = sim.step_count // self._steps_per_primitive
            scores = self.scores(sim, x0[0] + cfg.finish_dx, cfg.max_primitives - done,
                                 stop_at_finish=decisions is None)
            choice = int(np.argmax(scores))  # the first of equal scores
            if decisions is not None:
                decisions.append(Decision(primitive=done, scores=scores, choice=choice))
            return self.config.candidates[choice]

        return control

    def scores(self, sim: Any, finish_x: float, remaining: int,
               stop_at_finish: bool = False) -> np.ndarray:
        """(candidates,) look-ahead scores from the simulator's current state (left as found).

        `remaining` is the number of primitives the episode still has; a look-ahead never runs
        past them. `stop_at_finish`: once a look-ahead finishes, the candidates after it are not
        tried and score −inf. A finish scores the full distance, the most any look-ahead can,
        and ties go to the first, so the choice is the same; only the scores recorded for a
        student need them all. The teacher's own episodes (`costs`) take it: the last decisions
        before the finish line cost one to a few look-aheads instead of 12.
        """
        cfg, tc = self.rollout_config, self.config
        depth = max(1, min(tc.lookahead, remaining))
        to_end = depth == remaining
        snap = sim.snapshot()
        x_now = sim.torso_x()
        out = np.full(len(tc.candidates), -np.inf)
        for i, gait in enumerate(tc.candidates):
            outcome = sim.run_primitive(gait, cfg.primitive_s, finish_x=finish_x)
            fell_first = outcome.fell
            for _ in range(depth - 1):
                if outcome.fell or outcome.finished:
                    break
                outcome = sim.run_primitive(tc.follow, cfg.primitive_s, finish_x=finish_x)
            pos, orn = sim.torso_pose()
            score = min(float(pos[0]), finish_x) - x_now
            if not to_end and not outcome.finished:
                if outcome.fell:
                    score -= tc.fall_penalty_m * (2.0 if fell_first else 1.0)
                yaw, up = _yaw_and_up(orn)
                score -= tc.heading_penalty_m * abs(yaw) + tc.tilt_penalty_m * (1.0 - up)
            out[i] = score
            sim.restore(snap)
            if stop_at_finish and outcome.finished:
                break
        return out

    def rollout(self, seed: int, record: bool = False) -> TeacherRollout:
        """One teacher-driven episode on the terrain of `seed`, with every decision."""
        decisions: list[Decision] = []
        result = self.walk(seed, record, decisions)
        return TeacherRollout(result=result, decisions=decisions)

    def walk(self, seed: int, record: bool = False,
             decisions: list[Decision] | None = None) -> RolloutResult:
        """One teacher-driven episode on the terrain of `seed` on the world's simulator.
        Without `decisions` to fill, a look-ahead that finishes ends the search (the same
        choice, fewer look-aheads)."""
        sim = self.world.sim
        if self.variant == "paper-code":
            return self.world.run(self.controller(sim, decisions), int(seed), record=record)
        return rollout(sim, self.world.terrain(int(seed)), self.controller(sim, decisions),
                       self.rollout_config, record=record, needs_depth=record)

    def costs(self, seeds: np.ndarray) -> np.ndarray:
        """(n,) the teacher's cost on each terrain (the world's cost of the episode it drives)."""
        sd = check_seeds(seeds, "quadruped teacher seeds")
        return np.array([self.walk(int(s)).cost for s in sd], dtype=np.float64)


def _yaw_and_up(orn: np.ndarray) -> tuple[float, float]:
    """Heading (rad, 0 = +x) and torso up · world up of a quaternion (x, y, z, w)."""
    x, y, z, w = (float(v) for v in orn)
    yaw = math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return yaw, 1.0 - 2.0 * (x * x + y * y)
