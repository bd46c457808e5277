"""The paper-code variant in PyBullet, the paper's engine: pacplan's Bullet Derpy (checked
against pybullet_envs' own `MinitaurGymEnv` by benchmarks/quadruped_oracle.py) on the code's
boxes (`paper_code`), several times slower than MuJoCo.

The scene is built as the code's was: pybullet_data's `plane.urdf` (lateral friction 1), the 50
boxes as static bodies with `GEOM_CONCAVE_INTERNAL_EDGE` and Bullet's default friction 0.5, and
the visual-only goal marker. pybullet_envs loaded the plane first and added the boxes after the
robot; the order bodies are created in changes single chaotic rollouts, not their distribution.
"""

from __future__ import annotations

import os

import numpy as np

from pacplan.extras import require
from pacplan.worlds.quadruped.boxes import (
    BOX_HALF_EXTENTS,
    GOAL_MARKER_HALF_EXTENTS,
    GOAL_MARKER_X_M,
    BoxTerrain,
    box_poses,
)
from pacplan.worlds.quadruped.camera import CameraConfig
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.paper_code import (
    PAPER_CODE_DEFAULTS,
    PaperCodeConfig,
    code_depth,
    held_gait_targets,
    settle_targets,
    wrap_angles,
)
from pacplan.worlds.quadruped.sim import MinitaurSim, PhysicsConfig

pybullet = require("pybullet", "the quadruped world")
pybullet_data = require("pybullet_data", "the quadruped world")


class PaperCodeBulletSim(MinitaurSim):
    """The PyBullet Derpy with the paper code's terrain, settling, clock and sensing."""

    def __init__(self, physics: PhysicsConfig | None = None, camera: CameraConfig | None = None,
                 clock: PaperCodeConfig | None = None) -> None:
        super().__init__(physics, camera or CameraConfig(far_m=PAPER_CODE_DEFAULTS["depth_far_m"]))
        self.clock = clock or PaperCodeConfig()

    def _build_terrain(self, terrain: BoxTerrain) -> int:  # type: ignore[override]
        cid = self.cid
        plane = pybullet.loadURDF(os.path.join(pybullet_data.getDataPath(), "plane.urdf"),
                                  physicsClientId=cid)
        pos, quat = box_poses(terrain)
        for p, (w, x, y, z) in zip(pos, quat, strict=True):
            col = pybullet.createCollisionShape(pybullet.GEOM_BOX, halfExtents=BOX_HALF_EXTENTS,
                                                flags=pybullet.GEOM_CONCAVE_INTERNAL_EDGE,
                                                physicsClientId=cid)
            vis = pybullet.createVisualShape(pybullet.GEOM_BOX, halfExtents=BOX_HALF_EXTENTS,
                                             physicsClientId=cid)
            pybullet.createMultiBody(0, col, vis, p.tolist(), [x, y, z, w], physicsClientId=cid)
        marker = pybullet.createVisualShape(pybullet.GEOM_BOX,
                                            halfExtents=GOAL_MARKER_HALF_EXTENTS,
                                            rgbaColor=[0.7, 0, 0, 1], physicsClientId=cid)
        pybullet.createMultiBody(0, -1, marker, [GOAL_MARKER_X_M, 0.0, 0.0], physicsClientId=cid)
        return plane

    def _settle_targets(self) -> np.ndarray:
        return settle_targets(self.clock)

    def _gait_targets(self, params: GaitParams, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        return held_gait_targets(params, self.step_count, n_steps, self.clock,
                                 self.physics.time_step)

    def depth_image(self) -> np.ndarray:
        """The image through the code's float32 arithmetic (`paper_code.code_depth`)."""
        return code_depth(super().depth_image(), self.camera.far_m)

    def proprioception(self) -> np.ndarray:
        out = super().proprioception()
        out[:8] = wrap_angles(out[:8])
        return out
