"""PyBullet simulation of the Minitaur on a heightfield terrain: reset, sensing and stepping.

Physics follows the public code's environment (pybullet_envs' MinitaurGymEnv with PD control,
which the paper's code used): 0.002 s physics step, 60 solver iterations, the robot of
`PhysicsConfig.robot` as `scene` loads it (the Derpy by default), cone friction off, gravity
10 m/s², and an explicit PD torque kp·(q* − q) − kd·q̇ with kp = 8,
kd = 0.3 recomputed at *every* physics step. That environment held each motor target for 5 physics
steps (a 0.01 s control step); here the gait target is re-evaluated at every physics step, which is
finer, never coarser. The scene itself (terrain body, robot assembly and the two contact models
chosen by `mounted_contacts`) is built by `pacplan.worlds.quadruped.scene`.

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
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pacplan.errors import PacplanError
from pacplan.extras import require
from pacplan.worlds.quadruped.camera import CameraConfig, camera_pose, render_depth
from pacplan.worlds.quadruped.gait import NEUTRAL_MOTOR_ANGLES, GaitParams, gait_motor_angles
from pacplan.worlds.quadruped.scene import (
    DEFAULT_ROBOT,
    MOTOR_DIRECTION,
    build_terrain,
    load_robot,
    quiet_stdout,
    robot_spec,
)
from pacplan.worlds.quadruped.terrain import Terrain

pybullet = require("pybullet", "the quadruped world")

FELL_OFF_Z = -1.0


@dataclass(frozen=True)
class PhysicsConfig:
    """Simulator settings; the defaults match (or are finer than) the public code's physics.

    `robot` names one of `scene.ROBOTS`; `self_collision` and `mounted_contacts` (False: the
    clean contact model, see `scene`) apply to the `minitaur` robot only.
    """

    robot: str = DEFAULT_ROBOT
    time_step: float = 0.002
    solver_iterations: int = 60
    self_collision: bool = True
    mounted_contacts: bool = True
    kp: float = 8.0
    kd: float = 0.3
    terrain_friction: float = 1.0
    settle_s: float = 0.25
    check_every: int = 5  # fall / finish checks every 5 steps = 0.01 s, the public control step

    @property
    def fall_up_dot(self) -> float:
        """The robot's fall threshold on torso up · world up."""
        return robot_spec(self.robot).fall_up_dot


@dataclass
class PrimitiveOutcome:
    """What happened while one primitive ran."""

    fell: bool
    finished: bool
    steps: int
    path: list[tuple[float, float, float, float]] = field(default_factory=list)  # (t, x, y, z)


@dataclass(frozen=True)
class BulletSnapshot:
    """A saved PyBullet simulator (`MinitaurSim.snapshot`): Bullet's own in-memory state (bodies,
    velocities, contacts), the clock and the gait phase, valid until the next `reset`."""

    state_id: int
    generation: int
    step_count: int
    phase: float


class TorsoReadouts:
    """What both engines derive alike from `motor_state()` and `torso_pose()` (position,
    quaternion in PyBullet's (x, y, z, w) order): progress, the 22 proprioceptive values, the
    fall rule and the camera frame, written once."""

    camera: CameraConfig

    def motor_state(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def torso_pose(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def torso_x(self) -> float:
        """Forward position of the torso (m), the coordinate progress is measured along."""
        return float(self.torso_pose()[0][0])

    def proprioception(self) -> np.ndarray:
        """The 22 values: 8 motor angles, 8 motor velocities, torso position, roll-pitch-yaw."""
        q, qd = self.motor_state()
        pos, orn = self.torso_pose()
        rpy = np.array(pybullet.getEulerFromQuaternion(orn.tolist()))
        return np.concatenate([q, qd, pos, rpy])

    physics: PhysicsConfig

    def is_fallen(self) -> bool:
        """Torso up-vector · world up below the robot's threshold (the Derpy: 0.3, the
        paper's code), or the torso dropped off the terrain strip."""
        pos, orn = self.torso_pose()
        return _fallen(pos, orn, self.physics.fall_up_dot)

    def camera_frame(self) -> tuple[np.ndarray, np.ndarray]:
        """World position of the torso camera and its rotation camera -> world."""
        pos, orn = self.torso_pose()
        return camera_pose(pos, orn, self.camera)


class MinitaurSim(TorsoReadouts):
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
        self._generation = 0  # counts resets: a snapshot restores only in its own
        self._states: list[int] = []  # Bullet states saved since the last reset

    # ------------------------------------------------------------------ setup
    @property
    def cid(self) -> int:
        """PyBullet physics-client id (connected on first use, so constructing a sim is cheap)."""
        if self._cid is None:
            with quiet_stdout():
                self._cid = pybullet.connect(pybullet.DIRECT)
        return self._cid

    def close(self) -> None:
        """Disconnect from PyBullet (a later call reconnects)."""
        if self._cid is not None:
            self._states = []  # freed with the client
            with contextlib.suppress(Exception):
                pybullet.disconnect(physicsClientId=self._cid)
            self._cid = None

    def __del__(self) -> None:
        self.close()

    def reset(self, terrain: Terrain) -> None:
        """Rebuild the world on `terrain`, place the robot and let it settle; clock at 0."""
        cid = self.cid
        cfg = self.physics
        self._forget_states()
        self._generation += 1
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
        self.robot, self.motor_ids = load_robot(cid, robot_spec(cfg.robot), cfg.self_collision,
                                                cfg.mounted_contacts)
        # Settle: hold the pose the gait starts from, so t = 0 begins from rest.
        for target in self._settle_targets():
            self._apply_pd(target)
            pybullet.stepSimulation(physicsClientId=cid)
        self.step_count = 0
        self._phase = 0.0

    def _build_terrain(self, terrain: Terrain) -> int:
        """Add the terrain's bodies to the fresh simulation; the ground body's id."""
        return build_terrain(self.cid, terrain, self.physics.terrain_friction)

    def _settle_targets(self) -> np.ndarray:
        """(steps, 8) motor targets held while the robot settles before the clock starts."""
        steps = round(self.physics.settle_s / self.physics.time_step)
        return np.tile(NEUTRAL_MOTOR_ANGLES, (max(steps, 0), 1))

    def _gait_targets(self, params: GaitParams, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """(n_steps, 8) motor targets of the next `n_steps` physics steps and the gait phase
        after each: φ advances by ω·dt per step from where the last primitive left it."""
        phases = self._phase + params.omega * self.physics.time_step * np.arange(1, n_steps + 1)
        return gait_motor_angles(params, phases), phases

    # ------------------------------------------------------------------ state
    @property
    def time(self) -> float:
        """Simulated seconds since the rollout clock started (physics steps × time step)."""
        return self.step_count * self.physics.time_step

    def snapshot(self) -> BulletSnapshot:
        """Everything the next primitive depends on, for a look-ahead to come back to: Bullet's
        `saveState` (it keeps the contact points and the solver's cached impulses, so a
        restored run repeats bit for bit, tested) with the step count and the gait phase."""
        sid = pybullet.saveState(physicsClientId=self.cid)
        self._states.append(sid)
        return BulletSnapshot(state_id=sid, generation=self._generation,
                              step_count=self.step_count, phase=self._phase)

    def restore(self, snap: BulletSnapshot) -> None:
        """Put the simulator back where `snapshot` found it (its own snapshots of the current
        terrain only: a reset rebuilds the world and frees them)."""
        if (not isinstance(snap, BulletSnapshot) or snap.generation != self._generation
                or snap.state_id not in self._states):
            raise PacplanError("this snapshot was taken on another model or terrain: a "
                               "simulator restores only its own snapshots of its current terrain")
        pybullet.restoreState(stateId=snap.state_id, physicsClientId=self.cid)
        self.step_count = snap.step_count
        self._phase = snap.phase

    def _forget_states(self) -> None:
        """Free the states saved on this terrain (each holds a copy of the world)."""
        if self._cid is not None:
            for sid in self._states:
                with contextlib.suppress(Exception):
                    pybullet.removeState(sid, physicsClientId=self._cid)
        self._states = []

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

    # ------------------------------------------------------------------ camera
    def depth_image(self) -> np.ndarray:
        """(size, size) z-depth image from the torso camera, metres (see `camera.render_depth`)."""
        pos, orn = self.torso_pose()
        return render_depth(self.cid, pos, orn, self.camera)

    # ------------------------------------------------------------------ control
    def _apply_pd(self, target: np.ndarray) -> None:
        q, qd = self.motor_state()
        torque = self.physics.kp * (target - q) - self.physics.kd * qd
        pybullet.setJointMotorControlArray(
            self.robot,
            self.motor_ids,
            pybullet.TORQUE_CONTROL,
            forces=(torque * MOTOR_DIRECTION).tolist(),
            physicsClientId=self.cid,
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
        targets, phases = self._gait_targets(params, n_steps)
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
                if _fallen(pos, orn, cfg.fall_up_dot):
                    outcome.fell = True
                    break
                if finish_x is not None and pos[0] >= finish_x:
                    outcome.finished = True
                    break
        # Keep the phase bounded so long runs do not lose precision.
        self._phase = math.fmod(self._phase, 2.0 * math.pi)
        return outcome


def _fallen(pos: Sequence[float], orn: Sequence[float], up_dot_min: float) -> bool:
    """Tipped over (torso up axis · world up below `up_dot_min`) or dropped off the strip."""
    return _up_dot(orn) < up_dot_min or pos[2] < FELL_OFF_Z


def _up_dot(orn: Sequence[float] | np.ndarray) -> float:
    """World-z component of the torso's up axis (R[2, 2] of the quaternion)."""
    x, y = float(orn[0]), float(orn[1])
    return 1.0 - 2.0 * (x * x + y * y)
