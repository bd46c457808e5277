"""PyBullet simulation of the Minitaur on a heightfield terrain.

Physics follows the public code's environment (pybullet_envs' MinitaurGymEnv with PD control,
which the paper's code used): 0.002 s physics step, 60 solver iterations, self-collision on, cone
friction off, gravity 10 m/s², and an explicit PD torque kp·(q* − q) − kd·q̇ with kp = 8,
kd = 0.3 recomputed at *every* physics step. That environment held each motor target for 5 physics
steps (a 0.01 s control step); here the gait target is re-evaluated at every physics step, which is
finer, never coarser.

Contact model. With self-collision on, the URDF's assembly leaves links touching at rest: motor
hubs and hip brackets against the chassis they are mounted on. The public simulation keeps those
contacts; they rub friction into the hips and were two thirds of its contact rows. The default,
`mounted_contacts=True`, keeps them: the design's reference figures for the open-loop gait at
23.3° (1.7–5.5 m of 6, cost ≈ 0.3) are reproduced with them (1.6–6.0 m, mean cost 0.32 over
seeds 0–7) and not without (mean cost 0.10). `mounted_contacts=False` is the
clean model: links joined by fixed joints (chassis halves, hip brackets) are merged into one rigid
body each (`URDF_MERGE_FIXED_LINKS`: the same masses, inertias and shapes, 16 links instead of 26),
which turns the mounted pairs into parent-child pairs that Bullet never collides
(`MinitaurSim._mounted_pairs` filters any left over); real self-collisions (a leg hitting another
leg or the body) stay on. It is about 1.6x faster and the gait walks much better (cost ≈ 0.1 at
23.3°), so it changes the difficulty of the task: a deliberate choice for a config, not a default.

Speed, whichever the model: per-step bookkeeping is batched (one joint-state read and one torque
write for all 8 motors, against 16 single-joint calls through Python in the public code), and
depth is rendered by PyBullet's software renderer (about 1 ms a frame; a 2,500-ray batch takes
about 50 ms once the robot is in the scene).

Each `reset` rebuilds the whole simulation (`resetSimulation`), so a rollout depends only on its
terrain and policy and never on what the same process simulated before: that is what makes
`World.costs` deterministic across workers and chunkings.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pybullet
import pybullet_data

from pacplan.worlds.quadruped.camera import CameraConfig, camera_pose, render_depth
from pacplan.worlds.quadruped.gait import NEUTRAL_MOTOR_ANGLES, GaitParams, gait_motor_angles
from pacplan.worlds.quadruped.terrain import (
    GRID_DY_M,
    Terrain,
    grid_axes,
    heights_on_grid,
)

LEGS = ("front_left", "back_left", "front_right", "back_right")
MOTOR_DIRECTION = np.array([-1.0, -1.0, -1.0, -1.0, 1.0, 1.0, 1.0, 1.0])
START_POSITION = (0.0, 0.0, 0.2)
# Knee linkage: the two lower legs of a leg are pinned together at these points (URDF frames).
_KNEE_PIN_RIGHT = (0.0, 0.005, 0.2)
_KNEE_PIN_LEFT = (0.0, 0.01, 0.2)
_RESET_MOTOR_ANGLE = math.pi / 2
_RESET_KNEE_ANGLE = -2.1834
_MOUNTED_GAP_M = 1e-3  # links closer than this in the assembled rest pose are mounted together
FALL_UP_DOT = 0.5
FELL_OFF_Z = -1.0


@dataclass(frozen=True)
class PhysicsConfig:
    """Simulator settings; the defaults match (or are finer than) the public code's physics.

    `mounted_contacts=False` selects the clean contact model (see the module docstring).
    """

    time_step: float = 0.002
    solver_iterations: int = 60
    self_collision: bool = True
    mounted_contacts: bool = True
    kp: float = 8.0
    kd: float = 0.3
    terrain_friction: float = 1.0
    settle_s: float = 0.25
    check_every: int = 5  # fall / finish checks every 5 steps = 0.01 s, the public control step


@dataclass
class PrimitiveOutcome:
    """What happened while one primitive ran."""

    fell: bool
    finished: bool
    steps: int
    path: list[tuple[float, float, float, float]] = field(default_factory=list)  # (t, x, y, z)


@contextlib.contextmanager
def _quiet_stdout() -> Iterator[None]:
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


class MinitaurSim:
    """One PyBullet client holding a Minitaur and a terrain; rebuilt from scratch by `reset`."""

    def __init__(
        self, physics: PhysicsConfig | None = None, camera: CameraConfig | None = None
    ) -> None:
        self.physics = physics or PhysicsConfig()
        self.camera = camera or CameraConfig()
        self._cid: int | None = None
        self.robot = -1
        self.terrain_body = -1
        self.motor_ids: list[int] = []
        self.step_count = 0  # physics steps since the rollout clock started
        self._phase = 0.0

    # ------------------------------------------------------------------ setup
    @property
    def cid(self) -> int:
        """PyBullet physics-client id (connected on first use, so constructing a sim is cheap)."""
        if self._cid is None:
            with _quiet_stdout():
                self._cid = pybullet.connect(pybullet.DIRECT)
        return self._cid

    def close(self) -> None:
        """Disconnect from PyBullet (a later call reconnects)."""
        if self._cid is not None:
            with contextlib.suppress(Exception):
                pybullet.disconnect(physicsClientId=self._cid)
            self._cid = None

    def __del__(self) -> None:
        self.close()

    def reset(self, terrain: Terrain) -> None:
        """Rebuild the world on `terrain`, place the robot and let it settle; clock at 0."""
        cid = self.cid
        cfg = self.physics
        pybullet.resetSimulation(physicsClientId=cid)
        pybullet.setPhysicsEngineParameter(
            fixedTimeStep=cfg.time_step,
            numSolverIterations=cfg.solver_iterations,
            enableConeFriction=0,
            deterministicOverlappingPairs=1,
            physicsClientId=cid,
        )
        pybullet.setGravity(0.0, 0.0, -10.0, physicsClientId=cid)
        self.terrain_body = self._build_terrain(terrain)
        self.robot = self._load_robot()
        # Settle: hold the pose the gait starts from, so t = 0 begins from rest.
        for _ in range(round(cfg.settle_s / cfg.time_step)):
            self._apply_pd(NEUTRAL_MOTOR_ANGLES)
            pybullet.stepSimulation(physicsClientId=cid)
        self.step_count = 0
        self._phase = 0.0

    def _build_terrain(self, terrain: Terrain) -> int:
        cid = self.cid
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
        pybullet.changeDynamics(
            body, -1, lateralFriction=self.physics.terrain_friction, physicsClientId=cid
        )
        pybullet.changeVisualShape(body, -1, rgbaColor=[0.6, 0.6, 0.6, 1], physicsClientId=cid)
        return body

    def _load_robot(self) -> int:
        cid = self.cid
        # The clean model merges links bolted together by fixed joints into one rigid body each;
        # the public model keeps the URDF's structure and its mounted contacts.
        public = self.physics.mounted_contacts
        flags = 0 if public else pybullet.URDF_MERGE_FIXED_LINKS
        if self.physics.self_collision:
            flags |= pybullet.URDF_USE_SELF_COLLISION
        with _quiet_stdout():
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
        self.motor_ids = []
        for leg_index, leg in enumerate(LEGS):
            for side_index, side in enumerate("LR"):
                sign = MOTOR_DIRECTION[2 * leg_index + side_index]
                motor = joints[f"motor_{leg}{side}_joint"]
                knee = joints[f"knee_{leg}{side}_link"]
                pybullet.resetJointState(
                    robot, motor, sign * _RESET_MOTOR_ANGLE, 0.0, physicsClientId=cid
                )
                pybullet.resetJointState(
                    robot, knee, sign * _RESET_KNEE_ANGLE, 0.0, physicsClientId=cid
                )
                self.motor_ids.append(motor)
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
        # Free every joint of PyBullet's default velocity motors: motors get explicit torques,
        # knees are passive.
        for j in range(n_joints):
            pybullet.setJointMotorControl2(
                robot, j, pybullet.VELOCITY_CONTROL, targetVelocity=0, force=0, physicsClientId=cid
            )
        if self.physics.self_collision and not public:
            for a, b in self._mounted_pairs(robot):
                pybullet.setCollisionFilterPair(robot, robot, a, b, 0, physicsClientId=cid)
        return robot

    def _mounted_pairs(self, robot: int) -> list[tuple[int, int]]:
        """Link pairs within 1 mm of each other in the assembled rest pose.

        In the Minitaur URDF these are the motor housings and upper legs and the chassis they
        are bolted to; with self-collision on they would rub against it forever. Real
        collisions (a leg hitting another leg or the body while walking) stay enabled.
        """
        cid = self.cid
        pybullet.performCollisionDetection(physicsClientId=cid)
        pairs = {
            (min(cp[3], cp[4]), max(cp[3], cp[4]))
            for cp in pybullet.getContactPoints(robot, robot, physicsClientId=cid)
            if cp[8] < _MOUNTED_GAP_M
        }
        return sorted(pairs)

    # ------------------------------------------------------------------ state
    @property
    def time(self) -> float:
        """Simulated seconds since the rollout clock started (physics steps × time step)."""
        return self.step_count * self.physics.time_step

    def engine_time_step(self) -> float:
        """The time step the physics engine actually uses (read back from PyBullet)."""
        params = pybullet.getPhysicsEngineParameters(physicsClientId=self.cid)
        return float(params["fixedTimeStep"])

    def motor_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Motor angles and velocities (8,), in the leg model's motor convention."""
        states = pybullet.getJointStates(self.robot, self.motor_ids, physicsClientId=self.cid)
        q = np.array([s[0] for s in states]) * MOTOR_DIRECTION
        qd = np.array([s[1] for s in states]) * MOTOR_DIRECTION
        return q, qd

    def torso_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Torso position (3,) and orientation quaternion (x, y, z, w)."""
        pos, orn = pybullet.getBasePositionAndOrientation(self.robot, physicsClientId=self.cid)
        return np.array(pos), np.array(orn)

    def proprioception(self) -> np.ndarray:
        """The 22 values: 8 motor angles, 8 motor velocities, torso position, roll-pitch-yaw."""
        q, qd = self.motor_state()
        pos, orn = self.torso_pose()
        rpy = np.array(pybullet.getEulerFromQuaternion(orn))
        return np.concatenate([q, qd, pos, rpy])

    def is_fallen(self) -> bool:
        """Torso up-vector · world up < 0.5, or the torso dropped off the terrain strip."""
        pos, orn = pybullet.getBasePositionAndOrientation(self.robot, physicsClientId=self.cid)
        return _up_dot(orn) < FALL_UP_DOT or pos[2] < FELL_OFF_Z

    # ------------------------------------------------------------------ camera
    def camera_frame(self) -> tuple[np.ndarray, np.ndarray]:
        """World position of the torso camera and its rotation camera -> world."""
        pos, orn = self.torso_pose()
        return camera_pose(pos, orn, self.camera)

    def depth_image(self) -> np.ndarray:
        """(size, size) z-depth image from the torso camera, metres (see `camera.render_depth`)."""
        pos, orn = self.torso_pose()
        return render_depth(self.cid, pos, orn, self.camera)

    # ------------------------------------------------------------------ control
    def _apply_pd(self, target: np.ndarray) -> None:
        cid = self.cid
        states = pybullet.getJointStates(self.robot, self.motor_ids, physicsClientId=cid)
        q = np.array([s[0] for s in states]) * MOTOR_DIRECTION
        qd = np.array([s[1] for s in states]) * MOTOR_DIRECTION
        torque = self.physics.kp * (target - q) - self.physics.kd * qd
        pybullet.setJointMotorControlArray(
            self.robot,
            self.motor_ids,
            pybullet.TORQUE_CONTROL,
            forces=(torque * MOTOR_DIRECTION).tolist(),
            physicsClientId=cid,
        )

    def run_primitive(
        self,
        params: GaitParams,
        duration_s: float,
        finish_x: float | None = None,
        record_path: bool = False,
    ) -> PrimitiveOutcome:
        """Run the sine gait for `duration_s` simulated seconds, stopping early on a fall or
        when the torso crosses `finish_x`.

        The gait phase φ advances by ω·dt every physics step and carries over between
        primitives, so the motor targets stay continuous when ω changes.
        """
        cfg = self.physics
        cid = self.cid
        n_steps = round(duration_s / cfg.time_step)
        phases = self._phase + params.omega * cfg.time_step * np.arange(1, n_steps + 1)
        targets = gait_motor_angles(params, phases)
        outcome = PrimitiveOutcome(fell=False, finished=False, steps=0)
        for k in range(n_steps):
            self._apply_pd(targets[k])
            pybullet.stepSimulation(physicsClientId=cid)
            self.step_count += 1
            outcome.steps += 1
            self._phase = float(phases[k])
            if (k + 1) % cfg.check_every == 0 or k == n_steps - 1:
                pos, orn = pybullet.getBasePositionAndOrientation(self.robot, physicsClientId=cid)
                if record_path:
                    outcome.path.append((self.time, pos[0], pos[1], pos[2]))
                if _up_dot(orn) < FALL_UP_DOT or pos[2] < FELL_OFF_Z:
                    outcome.fell = True
                    break
                if finish_x is not None and pos[0] >= finish_x:
                    outcome.finished = True
                    break
        # Keep the phase bounded so long runs do not lose precision.
        self._phase = math.fmod(self._phase, 2.0 * math.pi)
        return outcome


def _up_dot(orn: tuple[float, float, float, float] | np.ndarray) -> float:
    """World-z component of the torso's up axis (R[2, 2] of the quaternion)."""
    x, y = float(orn[0]), float(orn[1])
    return 1.0 - 2.0 * (x * x + y * y)
