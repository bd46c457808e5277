"""Building the scene in a PyBullet client: the terrain heightfield and the assembled Minitaur.

Contact model. With self-collision on, the URDF's assembly leaves links touching at rest: motor
hubs and hip brackets against the chassis they are mounted on. The public simulation keeps those
contacts; they rub friction into the hips and were two thirds of its contact rows. The default,
`mounted_contacts=True`, keeps them: the design's reference figures for the open-loop gait at
23.3° (1.7–5.5 m of 6, cost ≈ 0.3) are reproduced with them (1.6–6.0 m, mean cost 0.32 over
seeds 0–7) and not without (mean cost 0.10). `mounted_contacts=False` is the
clean model: links joined by fixed joints (chassis halves, hip brackets) are merged into one rigid
body each (`URDF_MERGE_FIXED_LINKS`: the same masses, inertias and shapes, 16 links instead of 26),
which turns the mounted pairs into parent-child pairs that Bullet never collides
(`mounted_pairs` filters any left over); real self-collisions (a leg hitting another
leg or the body) stay on. It is about 1.6x faster and the gait walks much better (cost ≈ 0.1 at
23.3°), so it changes the difficulty of the task: a deliberate choice for a config, not a default.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator

import numpy as np
import pybullet
import pybullet_data

from pacplan.worlds.quadruped.terrain import GRID_DY_M, Terrain, grid_axes, heights_on_grid

LEGS = ("front_left", "back_left", "front_right", "back_right")
MOTOR_DIRECTION = np.array([-1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0])
START_POSITION = (0.0, 0.0, 0.2)
# Knee linkage: the two lower legs of a leg are pinned together at these points (URDF frames).
_KNEE_PIN_RIGHT = (0.0, 0.005, 0.2)
_KNEE_PIN_LEFT = (0.0, 0.01, 0.2)
_RESET_MOTOR_ANGLE = math.pi / 2
_RESET_KNEE_ANGLE = -2.1834
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


def load_minitaur(cid: int, self_collision: bool, mounted_contacts: bool) -> tuple[int, list[int]]:
    """Load the Minitaur in its rest pose with knees pinned and joints free of PyBullet's
    default motors; returns the robot's body id and its 8 motor joint ids in leg-model order."""
    # The clean model merges links bolted together by fixed joints into one rigid body each;
    # the public model keeps the URDF's structure and its mounted contacts.
    flags = 0 if mounted_contacts else pybullet.URDF_MERGE_FIXED_LINKS
    if self_collision:
        flags |= pybullet.URDF_USE_SELF_COLLISION
    with quiet_stdout():
        robot = pybullet.loadURDF(
            os.path.join(pybullet_data.getDataPath(), "quadruped/minitaur.urdf"),
            START_POSITION,
            flags=flags,
            physicsClientId=cid,
        )
    n_joints = pybullet.getNumJoints(robot, physicsClientId=cid)
    joints = {
        pybullet.getJointInfo(robot, j, physicsClientId=cid)[1].decode(): j
        for j in range(n_joints)
    }
    motor_ids = [_assemble_leg(cid, robot, joints, leg_index) for leg_index in range(len(LEGS))]
    # Free every joint of PyBullet's default velocity motors: motors get explicit torques,
    # knees are passive.
    for j in range(n_joints):
        pybullet.setJointMotorControl2(
            robot, j, pybullet.VELOCITY_CONTROL, targetVelocity=0, force=0, physicsClientId=cid
        )
    if self_collision and not mounted_contacts:
        for a, b in mounted_pairs(cid, robot):
            pybullet.setCollisionFilterPair(robot, robot, a, b, 0, physicsClientId=cid)
    return robot, [m for pair in motor_ids for m in pair]


def _assemble_leg(cid: int, robot: int, joints: dict[str, int], leg_index: int) -> list[int]:
    """Put one leg's motors and knees in the rest pose and pin its knees; its motor ids (L, R)."""
    leg = LEGS[leg_index]
    motors = []
    for side_index, side in enumerate("LR"):
        sign = MOTOR_DIRECTION[2 * leg_index + side_index]
        motor = joints[f"motor_{leg}{side}_joint"]
        knee = joints[f"knee_{leg}{side}_link"]
        pybullet.resetJointState(robot, motor, sign * _RESET_MOTOR_ANGLE, 0.0, physicsClientId=cid)
        pybullet.resetJointState(robot, knee, sign * _RESET_KNEE_ANGLE, 0.0, physicsClientId=cid)
        motors.append(motor)
    pybullet.createConstraint(
        robot,
        joints[f"knee_{leg}R_link"],
        robot,
        joints[f"knee_{leg}L_link"],
        pybullet.JOINT_POINT2POINT,
        [0.0, 0.0, 0.0],
        _KNEE_PIN_RIGHT,
        _KNEE_PIN_LEFT,
        physicsClientId=cid,
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
