"""Building the scene in a PyBullet client: the terrain heightfield and the assembled robot.

Two robots (`ROBOTS`), both from pybullet_data:

- `derpy` (the default): the Minitaur *Derpy*, `quadruped/minitaur_derpy.urdf`, the robot the
  paper's code drove (pybullet_envs' `MinitaurGymEnv(urdf_version=DERPY_V0_URDF_VERSION, ...)`):
  7.17 kg, its own foot contacts (stiffness 3e4, damping 1e3, spinning friction 0.3, from the
  URDF), loaded with `URDF_USE_SELF_COLLISION_EXCLUDE_PARENT` alone as pybullet_envs'
  `minitaur_derpy.py` does, a flag that does not switch self-collision on: **no
  self-collision**. Its knee linkage is pinned at (0, 0.0055, 0.100) on one lower leg and
  (0, 0.0055, 0.088) on the other, the side depending on the leg (`DERPY`). Checked against
  pybullet_envs itself by benchmarks/quadruped_oracle.py.
- `minitaur`: pybullet_envs' *default* Minitaur, `quadruped/minitaur.urdf`, which pacplan
  simulated before it was noticed that the paper used the Derpy; kept to reproduce those
  results, never the default. Contact model: with self-collision on, the URDF's assembly
  leaves links touching at rest (motor hubs and hip brackets against the chassis). The default,
  `mounted_contacts=True`, keeps those contacts, as pybullet_envs does for this URDF: they rub
  friction into the hips. `mounted_contacts=False` is the clean model: links joined by fixed
  joints are merged into one rigid body each (`URDF_MERGE_FIXED_LINKS`: the same masses,
  inertias and shapes, 16 links instead of 26), which turns the mounted pairs into parent-child
  pairs that Bullet never collides (`mounted_pairs` filters any left over); real
  self-collisions stay on. About 1.6x faster, and the gait walks much better on it.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from pacplan.errors import PacplanError
from pacplan.extras import require
from pacplan.worlds.quadruped.terrain import GRID_DY_M, Terrain, grid_axes, heights_on_grid

pybullet = require("pybullet", "the quadruped world")
pybullet_data = require("pybullet_data", "the quadruped world")

LEGS = ("front_left", "back_left", "front_right", "back_right")
MOTOR_DIRECTION = np.array([-1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0])
START_POSITION = (0.0, 0.0, 0.2)
_RESET_MOTOR_ANGLE = math.pi / 2
_RESET_KNEE_ANGLE = -2.1834


@dataclass(frozen=True)
class RobotSpec:
    """What differs between the two robots: the file, its knee joint names, where each leg's
    knee pin sits on its R and L lower legs (URDF link frames), and the fall threshold on
    torso up · world up."""

    name: str
    urdf: str  # relative to pybullet_data
    knee_joint: str  # format of a knee joint's name, with {leg} and {side}
    knee_pins: tuple[tuple[tuple[float, float, float], tuple[float, float, float]], ...]
    fall_up_dot: float

    def urdf_path(self) -> str:
        """Absolute path of the URDF; a missing file is refused naming it."""
        path = os.path.join(pybullet_data.getDataPath(), self.urdf)
        if not os.path.isfile(path):
            raise PacplanError(f"robot {self.name!r}: URDF not found: {path}")
        return path


_DERPY_SHORT = (0.0, 0.0055, 0.100)  # pybullet_envs' minitaur_derpy.py KNEE_CONSTRAINT_POINT_*
_DERPY_LONG = (0.0, 0.0055, 0.088)
_MINITAUR_PIN = ((0.0, 0.005, 0.2), (0.0, 0.01, 0.2))
DERPY = RobotSpec(
    name="derpy",
    urdf="quadruped/minitaur_derpy.urdf",
    knee_joint="knee_{leg}{side}_joint",
    # front_left and back_left: (R short, L long); the right-hand legs the other way round
    knee_pins=((_DERPY_SHORT, _DERPY_LONG), (_DERPY_SHORT, _DERPY_LONG),
               (_DERPY_LONG, _DERPY_SHORT), (_DERPY_LONG, _DERPY_SHORT)),
    fall_up_dot=0.3,  # the paper's Minitaur_Env.is_fallen
)
MINITAUR = RobotSpec(
    name="minitaur",
    urdf="quadruped/minitaur.urdf",
    knee_joint="knee_{leg}{side}_link",
    knee_pins=(_MINITAUR_PIN,) * 4,
    fall_up_dot=0.5,  # pacplan's rule before the Derpy, kept so old results reproduce
)
ROBOTS = {"derpy": DERPY, "minitaur": MINITAUR}
DEFAULT_ROBOT = "derpy"


def robot_spec(name: str) -> RobotSpec:
    """The robot called `name`; anything else is refused naming the allowed values."""
    if name not in ROBOTS:
        raise PacplanError(f"robot must be one of {', '.join(ROBOTS)}, got {name!r}")
    return ROBOTS[name]


_MOUNTED_GAP_M = 1e-3  # links closer than this in the assembled rest pose are mounted together


@contextlib.contextmanager
def quiet_stdout() -> Iterator[None]:
    """Silence PyBullet's C-level prints (they would corrupt JSON written to stdout)."""
    try:
        fd = os.dup(1)
    except OSError:  # pragma: no cover - no stdout
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 1)
            try:
                yield
            finally:
                os.dup2(fd, 1)
    finally:
        os.close(fd)


def build_terrain(cid: int, terrain: Terrain, friction: float) -> int:
    """Add `terrain` as a static heightfield body; returns its body id."""
    xs, ys = grid_axes(terrain.plank_length)
    heights = heights_on_grid(terrain)  # (ny, nx)
    shape = pybullet.createCollisionShape(
        shapeType=pybullet.GEOM_HEIGHTFIELD,
        flags=pybullet.GEOM_CONCAVE_INTERNAL_EDGE,
        meshScale=[terrain.plank_length, GRID_DY_M, 1.0],
        heightfieldData=heights.reshape(-1).tolist(),
        numHeightfieldRows=len(xs),
        numHeightfieldColumns=len(ys),
        physicsClientId=cid,
    )
    # PyBullet centres a heightfield on its bounding box; shift it back to world coordinates.
    centre = (
        0.5 * (xs[0] + xs[-1]),
        0.5 * (ys[0] + ys[-1]),
        0.5 * (float(heights.min()) + float(heights.max())),
    )
    body = pybullet.createMultiBody(0, shape, basePosition=centre, physicsClientId=cid)
    pybullet.changeDynamics(body, -1, lateralFriction=friction, physicsClientId=cid)
    pybullet.changeVisualShape(body, -1, rgbaColor=[0.6, 0.6, 0.6, 1], physicsClientId=cid)
    return body


def load_robot(cid: int, robot: RobotSpec, self_collision: bool = True,
               mounted_contacts: bool = True) -> tuple[int, list[int]]:
    """Load `robot` in its rest pose with knees pinned and joints free of PyBullet's default
    motors; returns its body id and its 8 motor joint ids in leg-model order.

    The Derpy is loaded as the paper's code loads it (`self_collision` and `mounted_contacts`
    are the Minitaur's options and do not apply)."""
    if robot.name == "derpy":
        flags = pybullet.URDF_USE_SELF_COLLISION_EXCLUDE_PARENT  # alone: no self-collision
    else:
        # The clean model merges links bolted together by fixed joints into one rigid body
        # each; the public model keeps the URDF's structure and its mounted contacts.
        flags = 0 if mounted_contacts else pybullet.URDF_MERGE_FIXED_LINKS
        if self_collision:
            flags |= pybullet.URDF_USE_SELF_COLLISION
    path = robot.urdf_path()
    with quiet_stdout():
        body = pybullet.loadURDF(path, START_POSITION, flags=flags, physicsClientId=cid)
    n_joints = pybullet.getNumJoints(body, physicsClientId=cid)
    joints = {
        pybullet.getJointInfo(body, j, physicsClientId=cid)[1].decode(): j
        for j in range(n_joints)
    }
    motor_ids = [_assemble_leg(cid, body, robot, joints, leg) for leg in range(len(LEGS))]
    # Free every joint of PyBullet's default velocity motors: motors get explicit torques,
    # knees are passive.
    for j in range(n_joints):
        pybullet.setJointMotorControl2(
            body, j, pybullet.VELOCITY_CONTROL, targetVelocity=0, force=0, physicsClientId=cid
        )
    if robot.name == "minitaur" and self_collision and not mounted_contacts:
        for a, b in mounted_pairs(cid, body):
            pybullet.setCollisionFilterPair(body, body, a, b, 0, physicsClientId=cid)
    return body, [m for pair in motor_ids for m in pair]


def load_minitaur(cid: int, self_collision: bool, mounted_contacts: bool) -> tuple[int, list[int]]:
    """The `minitaur` robot (`load_robot(cid, MINITAUR, ...)`)."""
    return load_robot(cid, MINITAUR, self_collision, mounted_contacts)


def _assemble_leg(cid: int, body: int, robot: RobotSpec, joints: dict[str, int],
                  leg_index: int) -> list[int]:
    """Put one leg's motors and knees in the rest pose and pin its knees; its motor ids (L, R)."""
    leg = LEGS[leg_index]
    motors = []
    knees = {}
    for side_index, side in enumerate("LR"):
        sign = MOTOR_DIRECTION[2 * leg_index + side_index]
        motor = joints[f"motor_{leg}{side}_joint"]
        knee = joints[robot.knee_joint.format(leg=leg, side=side)]
        pybullet.resetJointState(body, motor, sign * _RESET_MOTOR_ANGLE, 0.0, physicsClientId=cid)
        pybullet.resetJointState(body, knee, sign * _RESET_KNEE_ANGLE, 0.0, physicsClientId=cid)
        motors.append(motor)
        knees[side] = knee
    pin_r, pin_l = robot.knee_pins[leg_index]
    pybullet.createConstraint(
        body, knees["R"], body, knees["L"], pybullet.JOINT_POINT2POINT, [0.0, 0.0, 0.0],
        pin_r, pin_l, physicsClientId=cid,
    )
    return motors


def mounted_pairs(cid: int, robot: int) -> list[tuple[int, int]]:
    """Link pairs within 1 mm of each other in the assembled rest pose.

    In the Minitaur URDF these are the motor housings and upper legs and the chassis they
    are bolted to; with self-collision on they would rub against it forever. Real
    collisions (a leg hitting another leg or the body while walking) stay enabled.
    """
    pybullet.performCollisionDetection(physicsClientId=cid)
    pairs = {
        (min(cp[3], cp[4]), max(cp[3], cp[4]))
        for cp in pybullet.getContactPoints(robot, robot, physicsClientId=cid)
        if cp[8] < _MOUNTED_GAP_M
    }
    return sorted(pairs)
