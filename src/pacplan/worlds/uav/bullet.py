"""The PyBullet reference simulator: one environment at a time, DIRECT mode.

Depth comes from getCameraImage (TinyRenderer) and collisions from getClosestPoints between the
robot sphere and the field, so it shares no geometry code with the batched simulator: it is the
oracle that the batched simulator is checked against. Only the primitives, the policy scoring,
the cost formula and the grid-state bookkeeping of `dynamics` (where the robot is after each
primitive, when it collided) are shared: they are not simulation.

The whole field (floor, ceiling, walls, cylinders) is one multibody with fixed links, so a
collision check is one getClosestPoints call.
"""

from __future__ import annotations

import contextlib

import numpy as np

from pacplan.extras import require
from pacplan.worlds.uav import dynamics, policy_np, spec
from pacplan.worlds.uav import primitives as prims
from pacplan.worlds.uav.families import PAPER_FAMILY, PolicyFamily
from pacplan.worlds.uav.results import RolloutResult, cost_from_checks
from pacplan.worlds.uav.scene import Scene, sample_scene

p = require("pybullet", "the UAV world's PyBullet simulator (simulator: bullet)")

_IDENTITY = (0.0, 0.0, 0.0, 1.0)
_PARKED = (0.0, 0.0, -100.0)  # where the robot sphere waits while the camera renders


def _tunnel_boxes() -> list[tuple[tuple[float, float, float], tuple[float, float, float]]]:
    """(half extents, centre) of the floor, ceiling and two wall boxes (0.5 m half-thick)."""
    ylen = spec.TUNNEL_Y_MAX - spec.TUNNEL_Y_MIN
    ymid = (spec.TUNNEL_Y_MAX + spec.TUNNEL_Y_MIN) / 2
    t = 0.5  # half-thickness of the boxes
    hx = spec.WALL_X + 2 * t
    hz = (spec.CEIL_Z - spec.FLOOR_Z) / 2 + 2 * t
    zmid = (spec.CEIL_Z + spec.FLOOR_Z) / 2
    return [
        ((hx, ylen / 2, t), (0.0, ymid, spec.FLOOR_Z - t)),
        ((hx, ylen / 2, t), (0.0, ymid, spec.CEIL_Z + t)),
        ((t, ylen / 2, hz), (spec.WALL_X + t, ymid, zmid)),
        ((t, ylen / 2, hz), (-spec.WALL_X - t, ymid, zmid)),
    ]


class BulletSimulator:
    """PyBullet DIRECT client holding one scene at a time."""

    def __init__(self) -> None:
        self.cid = p.connect(p.DIRECT)
        self.scene: Scene | None = None
        _, up, forward = spec.camera_axes()
        self._up = up.tolist()
        self._forward = forward
        self._proj = p.computeProjectionMatrixFOV(
            spec.FOV_DEG, 1.0, spec.NEAR, spec.FAR, physicsClientId=self.cid
        )
        self.check_disp = prims.check_displacements()

    def close(self) -> None:
        """Disconnect the PyBullet client."""
        if self.cid >= 0:
            p.disconnect(physicsClientId=self.cid)
            self.cid = -1

    def __del__(self) -> None:  # pragma: no cover - best effort
        with contextlib.suppress(Exception):
            self.close()

    # ----------------------------------------------------------------- scene
    def load(self, scene: Scene) -> None:
        """Build the tunnel boxes, the 20 cylinders and the robot sphere for `scene`."""
        c = self.cid
        p.resetSimulation(physicsClientId=c)
        cols, vis, pos, orn = [], [], [], []
        for half, centre in _tunnel_boxes():
            cols.append(p.createCollisionShape(p.GEOM_BOX, halfExtents=half, physicsClientId=c))
            vis.append(p.createVisualShape(p.GEOM_BOX, halfExtents=half, physicsClientId=c))
            pos.append(centre)
            orn.append(_IDENTITY)
        for centre, q, r in zip(scene.centres, scene.quats, scene.radii, strict=True):
            cols.append(
                p.createCollisionShape(
                    p.GEOM_CYLINDER, radius=float(r), height=spec.OBST_LENGTH, physicsClientId=c
                )
            )
            vis.append(
                p.createVisualShape(
                    p.GEOM_CYLINDER, radius=float(r), length=spec.OBST_LENGTH, physicsClientId=c
                )
            )
            pos.append(tuple(float(v) for v in centre))
            orn.append(tuple(float(v) for v in q))
        n = len(cols)
        self.field = p.createMultiBody(
            baseMass=0.0,
            baseCollisionShapeIndex=-1,
            baseVisualShapeIndex=-1,
            basePosition=(0.0, 0.0, 0.0),
            linkMasses=[0.0] * n,
            linkCollisionShapeIndices=cols,
            linkVisualShapeIndices=vis,
            linkPositions=pos,
            linkOrientations=orn,
            linkInertialFramePositions=[(0.0, 0.0, 0.0)] * n,
            linkInertialFrameOrientations=[_IDENTITY] * n,
            linkParentIndices=[0] * n,
            linkJointTypes=[p.JOINT_FIXED] * n,
            linkJointAxis=[(0.0, 0.0, 1.0)] * n,
            physicsClientId=c,
        )
        sphere = p.createCollisionShape(p.GEOM_SPHERE, radius=spec.ROBOT_RADIUS, physicsClientId=c)
        # no visual shape: the camera sits inside the sphere and must not see it
        self.robot = p.createMultiBody(
            baseMass=0.0,
            baseCollisionShapeIndex=sphere,
            baseVisualShapeIndex=-1,
            basePosition=spec.START,
            physicsClientId=c,
        )
        self.scene = scene

    # ----------------------------------------------------------------- sensing
    def render(self, position: np.ndarray) -> np.ndarray:
        """z-depth image (50, 50) float32 in metres from the robot at `position`.

        PyBullet draws bodies without a visual shape from their collision shape, so the robot
        sphere (left wherever the last collision check put it) is first parked far below the
        floor; otherwise it shows up in the next rollout's images.
        The depth buffer value b maps to z = far·near / (far − (far − near)·b); values within
        1e-4 relative of the far plane are the far value (nothing hit).
        """
        p.resetBasePositionAndOrientation(self.robot, _PARKED, _IDENTITY, physicsClientId=self.cid)
        eye = np.asarray(position, dtype=np.float64) + np.asarray(spec.CAM_OFFSET)
        view = p.computeViewMatrix(
            eye.tolist(), (eye + self._forward).tolist(), self._up, physicsClientId=self.cid
        )
        _, _, _, buf, _ = p.getCameraImage(
            spec.IMG,
            spec.IMG,
            view,
            self._proj,
            renderer=p.ER_TINY_RENDERER,
            flags=p.ER_NO_SEGMENTATION_MASK,
            physicsClientId=self.cid,
        )
        b = np.asarray(buf, dtype=np.float64).reshape(spec.IMG, spec.IMG)
        z = spec.FAR * spec.NEAR / (spec.FAR - (spec.FAR - spec.NEAR) * b)
        z = np.where(z >= spec.FAR * (1 - 1e-4), spec.FAR, z)
        return np.minimum(z, spec.FAR).astype(np.float32)

    def collides(self, position: np.ndarray) -> bool:
        """Whether the robot sphere at `position` touches or penetrates any part of the field."""
        p.resetBasePositionAndOrientation(
            self.robot, [float(v) for v in position], _IDENTITY, physicsClientId=self.cid
        )
        pts = p.getClosestPoints(self.robot, self.field, 0.0, physicsClientId=self.cid)
        return any(pt[8] <= 0.0 for pt in pts)

    def sweep(self, start: np.ndarray, prim: int) -> int:
        """First colliding check (1..20, 0 = none) flying primitive `prim` from `start`."""
        for i, d in enumerate(self.check_disp[prim]):
            if self.collides(np.asarray(start) + d):
                return i + 1
        return 0

    # ----------------------------------------------------------------- rollouts
    def rollout_one(
        self, policy: policy_np.NumpyPolicy | None, forced: np.ndarray | None = None
    ) -> tuple[int, np.ndarray]:
        """One closed-loop rollout of `policy` (or a forced primitive sequence) in the scene.

        Returns (first colliding check 1..240 or 0, primitives flown (12,), -1 after collision).
        """
        state = dynamics.initial()
        chosen = np.full(spec.N_STEPS, -1, dtype=np.int64)
        while not dynamics.terminal(state):
            pos = dynamics.position(state)
            if forced is not None:
                prim = int(forced[state.step])
            else:
                assert policy is not None
                prim = policy.choose(self.render(pos))
            chosen[state.step] = prim
            state = dynamics.transition(state, prim, self.sweep(pos, prim))
        return state.checks, chosen

    def rollout(
        self,
        thetas: np.ndarray,
        seeds: np.ndarray,
        use_net: bool = True,
        net_scale: float = spec.DEFAULT_NET_SCALE,
        forced: np.ndarray | None = None,
        family: PolicyFamily = PAPER_FAMILY,
    ) -> RolloutResult:
        """k policies on n environments, one environment and one policy at a time; `family`:
        the net θ parametrises (`families`)."""
        thetas = np.asarray(thetas, dtype=np.float32)
        seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
        k = thetas.shape[0]
        checks = np.zeros((len(seeds), k), dtype=np.int64)
        chosen = np.full((len(seeds), k, spec.N_STEPS), -1, dtype=np.int64)
        policies = [policy_np.NumpyPolicy(t if use_net else None, net_scale, family)
                    for t in thetas]
        for i, seed in enumerate(seeds):
            self.load(sample_scene(int(seed)))
            for j in range(k):
                f = None if forced is None else forced[i, j]
                checks[i, j], chosen[i, j] = self.rollout_one(policies[j], f)
        return RolloutResult(cost_from_checks(checks), checks, chosen)
