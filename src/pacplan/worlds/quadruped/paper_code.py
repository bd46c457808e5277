"""The quadruped world as the paper's code ran it: `variant: paper-code` of the `quadruped` world.

pacplan's `quadruped` world follows the paper's TEXT (DESIGN.md §5). The published prior, cost
matrices and Table 1 figures came from its public code (irom-lab/PAC-Vision-Planning at
ef4063c), which differs from the text; this module is that code's experiment, rebuilt from
facts (shared/notes/quadruped-paper-world.md and the code's configuration), in MuJoCo on the
same Derpy twin the text world uses. Every difference from the text world:

- terrain: 25 pairs of tilted boxes whose tops form overlapping tents (`boxes`), θ drawn from
  NumPy's legacy generator seeded with the environment seed, slopes up to 35°·2/3 = 23.33°;
  about 1.9 visible crests per metre (text world: one ridge per metre, valleys at ground
  level); the ground plane stays (pybullet_data's 200 m plane), and a visual-only goal marker
  stands at x = 6 m;
- friction: the code's boxes keep Bullet's default lateral friction 0.5, so a foot (URDF
  friction 1) grips a box with 0.5 (Bullet multiplies) and the plane with 1 (the text world:
  1 everywhere); in MuJoCo the boxes get contact priority over the robot with that friction and
  the feet's calibrated softness (any other link touching a box gets the same: those are
  falls);
- timing: one control step is 5 physics steps (0.01 s) with each leg-model target held for all
  five (the text world: the gait is re-evaluated at every 0.002 s step); the gait clock runs at
  `gait_clock` (2) times simulated time and the gait phase is ω × clock, read at the start of
  each control step, with no carry-over between primitives (the phase jumps when ω changes;
  the text world accumulates φ so targets stay continuous); a primitive is 0.25 s (25 control
  steps), a rollout at most 20 of them (5 s);
- settling: 0.2 s with the motors held at π/2, then five all-zero leg-model actions (0.05 s)
  (the text world: 0.25 s in the gait's neutral pose);
- sensing: depth far plane 1000 m (text: 10 m), and depth passed through the code's float32
  arithmetic (depth buffer value, then far·near/(far − (far − near)·d) in float32), so the sky
  reads 999.02 m, not 1000; motor angles wrapped to [−π, π) as pybullet_envs'
  `GetMotorAngles` returns them;
- cost: |x − 6|/6 with x the torso's x in the world frame (the robot starts at x = 0) read at
  the START of the current primitive, 0 as soon as the torso passes x = 6 (checked every control
  step), and on a fall the same formula (the text world: 1 − Δx/6 from where the clock started,
  Δx read when the rollout ends). The code did not clip; a certificate needs [0, 1], so it is
  clipped here (it exceeds 1 only when the torso stands behind x = 0 at a primitive's start),
  and `RolloutResult.unclipped_cost` keeps the code's value; an observation that is not finite
  (NaN depth pixels from PyBullet's TinyRenderer) ends the rollout with cost 1, as in the text
  world (`episode.sensor_fault`; the code would have fed the NaN to its net).

The policy's η order is NOT changed: the paper's net reads its outputs as (a1, a2, steering,
speed) and pacplan's as (a1, a2, ω, a_st), a relabelling of weights that
`paper_prior.from_paper_layout` undoes exactly, so a weight vector means the same gait in both
variants. Both engines run it: MuJoCo (`paper_code_mujoco`, the default) and PyBullet
(`paper_code_bullet`, the paper's engine, several times slower); this module holds what they
share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped import episode
from pacplan.worlds.quadruped.boxes import (
    BOX_HALF_EXTENTS,
    GOAL_MARKER_HALF_EXTENTS,
    GOAL_MARKER_X_M,
    N_PAIRS,
    BoxTerrain,
)
from pacplan.worlds.quadruped.camera import CAMERA_NEAR_M
from pacplan.worlds.quadruped.episode import SENSOR_FAULT_COST, RolloutConfig
from pacplan.worlds.quadruped.gait import NEUTRAL_MOTOR_ANGLES, GaitParams, gait_motor_angles
from pacplan.worlds.quadruped.mjcf import GROUND_HALF_THICKNESS_M
from pacplan.worlds.quadruped.rollout import Controller, RolloutResult
from pacplan.worlds.quadruped.simulator import QuadrupedSim
from pacplan.worlds.quadruped.urdf import parse_urdf, urdf_path

PAPER_CODE_DEFAULTS = {"primitive_s": 0.25, "horizon_s": 5.0, "depth_far_m": 1000.0,
                       "gait_clock": 2.0, "finish_dx": 6.0}
ACTION_REPEAT = 5  # physics steps per control step (pybullet_envs' PD control)
SETTLE_HALF_PI_STEPS = 100  # pybullet_envs' reset: motors held at π/2 for 0.2 s
SETTLE_ZERO_ACTIONS = 5  # the paper's code: five all-zero leg-model actions before the first
MARKER_TOP_M = GOAL_MARKER_HALF_EXTENTS[2]
BOX_FRICTION = 0.5  # Bullet's default lateral friction: the code's boxes set none
PLANE_HALF_M = 100.0  # pybullet_data's plane.urdf: a 200 m × 200 m plane (visual and collision)


@dataclass(frozen=True)
class PaperCodeConfig:
    """The paper code's clock: control step = `action_repeat` physics steps, gait clock at
    `gait_clock` × simulated time."""

    gait_clock: float = 2.0
    action_repeat: int = ACTION_REPEAT


def wrap_angles(angles: np.ndarray) -> np.ndarray:
    """Angles mapped to [−π, π) as pybullet_envs' `MapToMinusPiToPi` maps them."""
    a = np.fmod(np.asarray(angles, dtype=np.float64), 2.0 * math.pi)
    a = np.where(a >= math.pi, a - 2.0 * math.pi, a)
    return np.where(a < -math.pi, a + 2.0 * math.pi, a)


def paper_code_mjcf(base: str, box_contact: str = "") -> str:
    """`base` (the text world's MJCF) with its plank pool replaced by the 50 box bodies
    (`plank0`..`plank49`, mocap, half extents (0.25, 5, 0.25), extra geom attributes
    `box_contact`), its ground box widened to
    pybullet_data's plane (200 m × 200 m, top at z = 0: the camera sees it to the sides of the
    10 m wide boxes and past their end, where the text world's 20 m × 10 m ground box would read
    the 1000 m far value) and the visual-only goal marker (no contacts; the camera's rays see
    it)."""
    lines = base.split("\n")
    kept = [ln for ln in lines if not ln.lstrip().startswith('<body name="plank')]
    grounds = [i for i, ln in enumerate(kept) if ln.lstrip().startswith('<geom name="ground"')]
    if len(grounds) != 1:
        raise PacplanError("the quadruped MJCF has no single ground geom to widen")
    half = PLANE_HALF_M
    kept[grounds[0]] = (f'    <geom name="ground" class="terrain" type="box" '
                        f'pos="0.0 0.0 {-GROUND_HALF_THICKNESS_M!r}" '
                        f'size="{half!r} {half!r} {GROUND_HALF_THICKNESS_M!r}"/>')
    end = kept.index("  </worldbody>")
    size = " ".join(repr(float(v)) for v in BOX_HALF_EXTENTS)
    new = [f'    <body name="plank{i}" mocap="true" pos="0.0 0.0 -100.0" quat="1.0 0.0 0.0 0.0">'
           f'<geom name="plank{i}" class="terrain" type="box" size="{size}"{box_contact}/></body>'
           for i in range(2 * N_PAIRS)]
    marker = " ".join(repr(float(v)) for v in GOAL_MARKER_HALF_EXTENTS)
    new.append(f'    <geom name="goal_marker" class="terrain" type="box" contype="0" '
               f'conaffinity="0" pos="{GOAL_MARKER_X_M!r} 0.0 0.0" size="{marker}" '
               f'rgba="0.7 0 0 1"/>')
    return "\n".join(kept[:end] + new + kept[end:])


def code_depth(z: np.ndarray, far: float) -> np.ndarray:
    """z-depth images as the code computed them: the depth-buffer value d of each z (float32),
    then far·near/(far − (far − near)·d) in float32 (the sky: 999.02 m at far 1000)."""
    near = CAMERA_NEAR_M
    z64 = np.asarray(z, dtype=np.float64)
    d = (far / (far - near) * (1.0 - near / z64)).astype(np.float32)
    return (np.float32(far * near) / (np.float32(far) - np.float32(far - near) * d)
            ).astype(np.float32)


def settle_targets(clock: PaperCodeConfig) -> np.ndarray:
    """(steps, 8) motor targets of the code's settling: π/2 for 100 physics steps, then five
    all-zero leg-model actions of `action_repeat` steps each."""
    half_pi = np.full(8, math.pi / 2)
    zero_steps = SETTLE_ZERO_ACTIONS * clock.action_repeat
    return np.vstack([np.tile(half_pi, (SETTLE_HALF_PI_STEPS, 1)),
                      np.tile(NEUTRAL_MOTOR_ANGLES, (zero_steps, 1))])


def held_gait_targets(params: GaitParams, step_count: int, n_steps: int, clock: PaperCodeConfig,
                      time_step: float) -> tuple[np.ndarray, np.ndarray]:
    """Targets and phases of the next `n_steps` physics steps from `step_count` (counted from
    the clock's start): control step c holds the gait at phase
    ω · gait_clock · c · (action_repeat · dt) for its `action_repeat` physics steps."""
    steps = step_count + np.arange(n_steps)
    control = (steps // clock.action_repeat).astype(np.float64)
    period = clock.action_repeat * time_step
    phases = params.omega * (clock.gait_clock * period * control)
    return gait_motor_angles(params, phases), phases


def box_contact_attributes(robot: str, foot_solref: tuple[float, ...],
                           foot_solimp: tuple[float, ...]) -> str:
    """MJCF attributes of the boxes: contact priority over the robot, a foot's friction on
    them (its URDF friction × Bullet's default 0.5) and the feet's calibrated softness."""
    _, links, _ = parse_urdf(urdf_path(robot))
    foot_mu = next(lk.foot_friction for lk in links if lk.foot_friction is not None)
    mu = BOX_FRICTION * foot_mu
    return (f' priority="2" friction="{mu!r} 0.005 0.0001" '
            f'solref="{" ".join(repr(float(v)) for v in foot_solref)}" '
            f'solimp="{" ".join(repr(float(v)) for v in foot_solimp)}"')


def terrain_top(terrain: BoxTerrain) -> float:
    """The highest point a ray can meet on this terrain (crest or goal marker)."""
    peaks = terrain.peak_heights
    return max(MARKER_TOP_M, float(peaks.max()) if peaks.size else 0.0)


@dataclass
class PaperCodeResult(RolloutResult):
    """A paper-code rollout; `unclipped_cost` is the code's |x − 6|/6 before the clip."""

    unclipped_cost: float = 0.0
    x_at_primitive_start: list[float] = field(default_factory=list)


def paper_code_cost(x_start: float, goal_x: float, finished: bool) -> tuple[float, float]:
    """(clipped, unclipped) cost: 0 past the goal, else |x_start − goal| / goal."""
    raw = 0.0 if finished else abs(x_start - goal_x) / goal_x
    return float(min(max(raw, 0.0), 1.0)), float(raw)


def paper_code_rollout(sim: QuadrupedSim, terrain: BoxTerrain, controller: Controller,
                       config: RolloutConfig, record: bool = False) -> PaperCodeResult:
    """One rollout with the paper code's end rule and cost: up to `max_primitives` primitives,
    stopped at a fall or once the torso passes x = finish_dx (world frame, checked every
    control step); the cost reads x at the start of the primitive that was running. An
    observation that is not finite ends it with cost 1, as in the text world's episode."""
    sim.reset(terrain)  # type: ignore[arg-type]
    goal = config.finish_dx
    gaits: list[GaitParams] = []
    starts: list[float] = []
    path: list[tuple[float, float, float, float]] = []
    first_depth = None
    start_x = sim.torso_x()
    if record:
        pos = sim.torso_pose()[0]
        path.append((0.0, float(pos[0]), float(pos[1]), float(pos[2])))
    fell = finished = fault = False
    for _ in range(config.max_primitives):
        start_x = sim.torso_x()
        starts.append(start_x)
        depth = sim.depth_image()
        proprio = sim.proprioception().astype(np.float32)
        if episode.sensor_fault({"depth": depth, "proprio": proprio}):
            fault = True
            break
        if first_depth is None and record:
            first_depth = depth
        gaits.append(controller(depth, proprio))
        outcome = sim.run_primitive(gaits[-1], config.primitive_s, finish_x=goal,
                                    record_path=record)
        path.extend(outcome.path)
        fell, finished = outcome.fell, outcome.finished
        if fell or finished:
            break
    cost, raw = ((SENSOR_FAULT_COST, SENSOR_FAULT_COST) if fault
                 else paper_code_cost(start_x, goal, finished))
    return PaperCodeResult(
        cost=cost, dx=sim.torso_x() - starts[0], sim_time=sim.time, fell=fell,
        finished=finished, primitives=len(gaits), gaits=gaits,
        path=np.array(path, dtype=np.float64).reshape(-1, 4), first_depth=first_depth,
        unclipped_cost=raw, x_at_primitive_start=starts, sensor_fault=fault,
    )
