"""MuJoCo simulation of the Minitaur on ridge terrain, a drop-in for `sim.MinitaurSim`.

Same robot (the MJCF `mjcf` generates from the same URDF, with PyBullet's masses and inertias),
same terrain, gait, PD law (as position servos), camera, proprioception and fall rule; about
eight times cheaper per simulated second (benchmarks/quadruped_rollouts.py --engines-only).
What differs is the contact model (see `mjcf`): walking is chaotic, so the two engines can
agree on distributions over terrains only, not on single rollouts.

One code path: every primitive (and the settling at reset) runs through `mujoco.rollout`, which
steps in C and releases the GIL, so several simulators in threads use several cores. Fall and
finish checks read the returned states every `check_every` steps; on a stop the simulator is set
back to the state at that step, exactly as if it had stopped stepping there. A rollout depends
only on its terrain and policy (`reset` clears all of MjData), so results do not depend on the
thread count or on what the simulator ran before.

Depth: the torso camera's 2,500 rays are cast with `mujoco.mj_multiRay` (no GL), one ray per
pixel of the same pinhole camera PyBullet renders, where its renderer samples; a ray direction
whose optical-axis component is 1 makes the returned distance the z-depth directly. The robot
is seen through its collision shapes (PyBullet draws its visual meshes). A ray costs a pass over
every geom, and the terrain's 10 m wide boxes pass every ray's bounding test. A ray that starts
above the highest crest and does not point down can never meet the terrain, so those rays (the
sky, about 40 % of the image) are cast against the robot alone, or not at all while every robot
geom's bounding box is below the eye: the same image bit for bit, about 25 % less ray time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pacplan.errors import PacplanError
from pacplan.extras import require
from pacplan.worlds.quadruped.camera import CAMERA_NEAR_M, CameraConfig, camera_pose
from pacplan.worlds.quadruped.gait import NEUTRAL_MOTOR_ANGLES, GaitParams, gait_motor_angles
from pacplan.worlds.quadruped.mjcf import (
    TERRAIN_GROUP,
    MjcfConfig,
    MujocoContact,
    default_contact,
    knee_joint_names,
    minitaur_mjcf,
    motor_joint_names,
    plank_poses,
)
from pacplan.worlds.quadruped.scene import MOTOR_DIRECTION, START_POSITION
from pacplan.worlds.quadruped.sim import PhysicsConfig, PrimitiveOutcome, TorsoReadouts, _fallen
from pacplan.worlds.quadruped.terrain import Terrain

mujoco = require("mujoco", "the quadruped world with physics: mujoco")
mj_rollout = require("mujoco.rollout", "the quadruped world with physics: mujoco")

_RESET_MOTOR_ANGLE = math.pi / 2  # `scene`'s assembled rest pose
_RESET_KNEE_ANGLE = -2.1834
_STATE = mujoco.mjtState.mjSTATE_FULLPHYSICS.value
_TOP_MARGIN_M = 1e-6  # clearance above the highest crest for the sky rays' shortcut


@dataclass(frozen=True)
class SimSnapshot:
    """A saved MuJoCo simulator (`MujocoMinitaurSim.snapshot`): its data, clock and phase."""

    model: mujoco.MjModel
    data: mujoco.MjData
    step_count: int
    phase: float
    plank_pos: np.ndarray


class MujocoMinitaurSim(TorsoReadouts):
    """A MuJoCo model of the Minitaur and a plank pool; `reset` places a terrain in it.

    Each simulator owns its model (the planks' poses live there), so use one per thread.
    """

    def __init__(
        self,
        physics: PhysicsConfig | None = None,
        camera: CameraConfig | None = None,
        contact: MujocoContact | None = None,
    ) -> None:
        self.physics = physics or PhysicsConfig()
        self.camera = camera or CameraConfig()
        self.contact = contact or default_contact(self.physics.robot)
        self.model: mujoco.MjModel | None = None
        self.data: mujoco.MjData | None = None
        self._plank_length: float | None = None
        self.step_count = 0
        self._phase = 0.0
        self._rays = _camera_rays(self.camera)
        self._terrain_top = 0.0  # highest point of the terrain placed by `reset`
        self.ray_shortcuts = True  # False: cast every ray at every geom (the benchmark's "before")
        self._robot_only = np.ones(6, dtype=np.uint8)  # mj_multiRay geom groups without terrain
        self._robot_only[TERRAIN_GROUP] = 0

    # ------------------------------------------------------------------ setup
    def _build(self, plank_length: float) -> None:
        """Compile the model for this plank length (once; terrains then only move planks)."""
        cfg = self.physics
        self.model = model = mujoco.MjModel.from_xml_string(self._mjcf_text(plank_length))
        self.data = mujoco.MjData(model)
        self._plank_length = plank_length
        self._base_adr = int(model.jnt_qposadr[model.joint("base").id])
        self._motor_q = np.array([model.jnt_qposadr[model.joint(n).id]
                                  for n in motor_joint_names()])
        self._motor_v = np.array([model.jnt_dofadr[model.joint(n).id]
                                  for n in motor_joint_names()])
        self._knee_q = np.array([model.jnt_qposadr[model.joint(n).id]
                                 for n in knee_joint_names(cfg.robot)])
        self._nstate = mujoco.mj_stateSize(model, _STATE)
        self._plank_bodies = np.array([model.body(f"plank{i}").id for i in range(model.nmocap)])
        self._robot_geoms = np.flatnonzero(model.geom_group != TERRAIN_GROUP)

    def _mjcf_config(self, plank_length: float) -> MjcfConfig:
        """The generated model's settings (a subclass with another terrain pool reuses them)."""
        cfg = self.physics
        return MjcfConfig(
            time_step=cfg.time_step, kp=cfg.kp, kd=cfg.kd, terrain_friction=cfg.terrain_friction,
            robot=cfg.robot, self_collision=cfg.self_collision, plank_length=plank_length,
            contact=self.contact,
        )

    def _mjcf_text(self, plank_length: float) -> str:
        """The MJCF the simulator compiles: robot, ground and a pool of plank bodies
        `plank0`, `plank1`, ... (mocap) that `_terrain_poses` places."""
        return minitaur_mjcf(self._mjcf_config(plank_length))

    def _terrain_poses(self, terrain: Terrain) -> tuple[np.ndarray, np.ndarray, float]:
        """Positions and (w, x, y, z) quaternions of the pool's bodies for `terrain`, and the
        highest point any ray could meet there (for the sky rays' shortcut)."""
        pos, quat = plank_poses(terrain)
        peaks = terrain.peak_heights
        return pos, quat, max(0.0, float(peaks.max()) if peaks.size else 0.0)

    def _settle_targets(self) -> np.ndarray:
        """(steps, 8) motor targets held while the robot settles before the clock starts."""
        settle = round(self.physics.settle_s / self.physics.time_step)
        return np.tile(NEUTRAL_MOTOR_ANGLES, (max(settle, 0), 1))

    def _gait_targets(self, params: GaitParams, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        """(n_steps, 8) motor targets of the next `n_steps` physics steps and the gait phase
        after each: φ advances by ω·dt per step from where the last primitive left it."""
        phases = self._phase + params.omega * self.physics.time_step * np.arange(1, n_steps + 1)
        return gait_motor_angles(params, phases), phases

    def close(self) -> None:
        """Drop the model (a later reset rebuilds it); nothing external to release."""
        self.model = self.data = None
        self._plank_length = None

    def reset(self, terrain: Terrain) -> None:
        """Place `terrain`, put the robot in its rest pose and let it settle; clock at 0."""
        if self._plank_length != terrain.plank_length:
            self._build(terrain.plank_length)
        m, d = self.model, self.data
        assert m is not None and d is not None
        mujoco.mj_resetData(m, d)
        # `mujoco.rollout` resets the data's mocap poses to the model's, so the planks are
        # placed in this simulator's own model (cheap: no recompilation).
        pos, quat, self._terrain_top = self._terrain_poses(terrain)
        m.body_pos[self._plank_bodies] = pos
        m.body_quat[self._plank_bodies] = quat
        d.mocap_pos[:] = pos
        d.mocap_quat[:] = quat
        d.qpos[self._base_adr:self._base_adr + 7] = (*START_POSITION, 1.0, 0.0, 0.0, 0.0)
        d.qpos[self._motor_q] = MOTOR_DIRECTION * _RESET_MOTOR_ANGLE
        d.qpos[self._knee_q] = MOTOR_DIRECTION * _RESET_KNEE_ANGLE
        settle = self._settle_targets()
        if len(settle) > 0:
            self._advance(settle)
        else:
            mujoco.mj_kinematics(m, d)
        self.step_count = 0
        self._phase = 0.0

    def _advance(self, targets: np.ndarray) -> np.ndarray:
        """Step once per row of motor targets (leg-model angles) with `mujoco.rollout`; the
        (steps, nstate) states after each step. The data is left at the last state."""
        m, d = self.model, self.data
        assert m is not None and d is not None
        start = np.empty(self._nstate)
        mujoco.mj_getState(m, d, start, _STATE)
        control = (np.asarray(targets) * MOTOR_DIRECTION)[None]
        states, _ = mj_rollout.rollout(
            m, d, start[None], control, initial_warmstart=d.qacc_warmstart.copy()[None]
        )
        return states[0]

    def _set_state(self, state: np.ndarray) -> None:
        """Put the data at `state` and refresh the poses that sensing reads."""
        assert self.model is not None and self.data is not None
        mujoco.mj_setState(self.model, self.data, state, _STATE)
        mujoco.mj_kinematics(self.model, self.data)

    # ------------------------------------------------------------------ state
    @property
    def time(self) -> float:
        """Simulated seconds since the rollout clock started (physics steps × time step)."""
        return self.step_count * self.physics.time_step

    def engine_time_step(self) -> float:
        """The time step the compiled model integrates with."""
        if self.model is None:
            raise PacplanError("the MuJoCo simulator has no model yet: call reset(terrain)")
        return float(self.model.opt.timestep)

    def _require(self) -> tuple[mujoco.MjModel, mujoco.MjData]:
        if self.model is None or self.data is None:
            raise PacplanError("the MuJoCo simulator has no model yet: call reset(terrain)")
        return self.model, self.data

    def motor_state(self) -> tuple[np.ndarray, np.ndarray]:
        """Motor angles and velocities (8,), in the leg model's motor convention."""
        _, d = self._require()
        return d.qpos[self._motor_q] * MOTOR_DIRECTION, d.qvel[self._motor_v] * MOTOR_DIRECTION

    def torso_pose(self) -> tuple[np.ndarray, np.ndarray]:
        """Torso position (3,) and orientation quaternion (x, y, z, w), PyBullet's order."""
        _, d = self._require()
        q = d.qpos[self._base_adr:self._base_adr + 7]
        return q[:3].copy(), np.array([q[4], q[5], q[6], q[3]])

    def snapshot(self) -> SimSnapshot:
        """Everything the next primitive depends on, for a look-ahead to come back to.

        The whole MjData (the physics, and the solver warm start that `mujoco.rollout` is
        handed: the physics state alone drifts by 1e-15 m within a few primitives), the step
        count and the gait phase; `restore` puts them back bit for bit.
        """
        m, d = self._require()
        copy = mujoco.MjData(m)
        mujoco.mj_copyData(copy, m, d)
        return SimSnapshot(model=m, data=copy, step_count=self.step_count, phase=self._phase,
                           plank_pos=m.body_pos[self._plank_bodies].copy())

    def restore(self, snap: SimSnapshot) -> None:
        """Put the simulator back where `snapshot` found it (same model and terrain only)."""
        m, d = self._require()
        if snap.model is not m or not np.array_equal(m.body_pos[self._plank_bodies],
                                                     snap.plank_pos):
            raise PacplanError("this snapshot was taken on another model or terrain: a "
                               "simulator restores only its own snapshots of its current terrain")
        mujoco.mj_copyData(d, m, snap.data)
        self.step_count = snap.step_count
        self._phase = snap.phase

    # ------------------------------------------------------------------ camera
    def depth_image(self) -> np.ndarray:
        """(size, size) float32 z-depth in metres from the torso camera, row 0 at the top;
        no hit within the far value (the sky) reads far, as PyBullet's camera does."""
        pos, orn = self.torso_pose()
        return self.depth_from(pos, orn)

    def depth_from(self, torso_pos: np.ndarray, torso_orn: np.ndarray) -> np.ndarray:
        """The depth image the torso camera would see with the torso at this pose
        (orientation (x, y, z, w)); the scene is the simulator's current one."""
        m, d = self._require()
        eye, rot = camera_pose(torso_pos, torso_orn, self.camera)
        vec = self._rays @ rot.T  # (n, 3) world directions, optical-axis component 1
        n = vec.shape[0]
        geom = np.empty(n, dtype=np.int32)
        dist = np.empty(n, dtype=np.float64)
        far = self.camera.far_m
        # Rays from above every crest that do not point down cannot meet the terrain; if the
        # robot's geoms are all below the eye as well, they meet nothing at all.
        above = self.ray_shortcuts and eye[2] > self._terrain_top + _TOP_MARGIN_M
        sky = vec[:, 2] >= 0.0 if above else None
        if sky is None or not sky.any():
            mujoco.mj_multiRay(m, d, eye, vec.reshape(-1), None, 1, -1, geom, dist, None, n,
                               far)
        else:
            dist[sky] = -1.0
            casts = [(~sky, None)]
            if self._robot_top() >= eye[2] - _TOP_MARGIN_M:
                casts.append((sky, self._robot_only))
            for rays, groups in casts:
                k = int(rays.sum())
                if k:
                    g, dd = np.empty(k, dtype=np.int32), np.empty(k)
                    mujoco.mj_multiRay(m, d, eye, np.ascontiguousarray(vec[rays]).reshape(-1),
                                       groups, 1, -1, g, dd, None, k, far)
                    dist[rays] = dd
        z = np.where(dist < 0, far, dist)
        size = self.camera.size
        return np.clip(z, CAMERA_NEAR_M, far).astype(np.float32).reshape(size, size)

    def _robot_top(self) -> float:
        """Highest point of the robot's geoms' bounding boxes (m), at the current poses."""
        m, d = self._require()
        ids = self._robot_geoms
        rot = d.geom_xmat[ids].reshape(-1, 3, 3)[:, 2, :]  # world-z row of each geom frame
        centre = d.geom_xpos[ids, 2] + np.einsum("ij,ij->i", rot, m.geom_aabb[ids, :3])
        reach = np.einsum("ij,ij->i", np.abs(rot), m.geom_aabb[ids, 3:])  # box half-height
        return float((centre + reach).max())

    # ------------------------------------------------------------------ control
    def run_primitive(
        self,
        params: GaitParams,
        duration_s: float,
        finish_x: float | None = None,
        record_path: bool = False,
    ) -> PrimitiveOutcome:
        """Run the sine gait for `duration_s` simulated seconds, stopping early on a fall or
        when the torso crosses `finish_x` (checked every `check_every` steps, as in Bullet).

        The gait phase φ advances by ω·dt every physics step and carries over between
        primitives, so the motor targets stay continuous when ω changes.
        """
        cfg = self.physics
        self._require()
        n_steps = round(duration_s / cfg.time_step)
        outcome = PrimitiveOutcome(fell=False, finished=False, steps=0)
        if n_steps <= 0:
            return outcome
        targets, phases = self._gait_targets(params, n_steps)
        states = self._advance(targets)
        checks = [k for k in range(n_steps) if (k + 1) % cfg.check_every == 0 or k == n_steps - 1]
        a = 1 + self._base_adr  # qpos starts after the time entry of the state
        stop = n_steps - 1
        for k in checks:
            pos = states[k, a:a + 3]
            w, x, y, z = states[k, a + 3:a + 7]
            if record_path:
                outcome.path.append(((self.step_count + k + 1) * cfg.time_step,
                                     float(pos[0]), float(pos[1]), float(pos[2])))
            if _fallen(pos, (x, y, z, w), self.physics.fall_up_dot):
                outcome.fell, stop = True, k
                break
            if finish_x is not None and pos[0] >= finish_x:
                outcome.finished, stop = True, k
                break
        self._set_state(states[stop])
        outcome.steps = stop + 1
        self.step_count += stop + 1
        # Keep the phase bounded so long runs do not lose precision.
        self._phase = math.fmod(float(phases[stop]), 2.0 * math.pi)
        return outcome


def _camera_rays(cfg: CameraConfig) -> np.ndarray:
    """(size², 3) ray directions in the camera frame (axis, left, up), one per pixel in
    row-major order from the top-left, scaled so the optical-axis component is 1.

    They sample where PyBullet's TinyRenderer samples (measured: the integer pixel corner, at
    x = j and y = r + 1 from the top-left, not the pixel centre), so both engines see the same
    image of the same scene.
    """
    t = math.tan(math.radians(cfg.fov_deg) / 2.0)
    k = np.arange(cfg.size, dtype=np.float64)
    right = (2.0 * k / cfg.size - 1.0) * t
    up = (1.0 - 2.0 * (k + 1.0) / cfg.size) * t
    rr, uu = np.meshgrid(right, up)  # row 0 at the top, column 0 at the left
    return np.stack([np.ones(rr.size), -rr.reshape(-1), uu.reshape(-1)], axis=1)
