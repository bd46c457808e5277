"""The paper-code variant in MuJoCo: the Derpy twin on the code's boxes (`paper_code`)."""

from __future__ import annotations

import numpy as np

from pacplan.worlds.quadruped.boxes import BoxTerrain, box_poses
from pacplan.worlds.quadruped.camera import CameraConfig
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.mujoco_sim import MujocoMinitaurSim
from pacplan.worlds.quadruped.paper_code import (
    PAPER_CODE_DEFAULTS,
    PaperCodeConfig,
    box_contact_attributes,
    code_depth,
    held_gait_targets,
    paper_code_mjcf,
    settle_targets,
    terrain_top,
    wrap_angles,
)
from pacplan.worlds.quadruped.sim import PhysicsConfig


class PaperCodeMujocoSim(MujocoMinitaurSim):
    """The MuJoCo Derpy with the paper code's terrain, settling, clock and sensing."""

    def __init__(self, physics: PhysicsConfig | None = None, camera: CameraConfig | None = None,
                 clock: PaperCodeConfig | None = None) -> None:
        super().__init__(physics, camera or CameraConfig(far_m=PAPER_CODE_DEFAULTS["depth_far_m"]))
        self.clock = clock or PaperCodeConfig()

    def _mjcf_text(self, plank_length: float) -> str:
        contact = box_contact_attributes(self.physics.robot, self.contact.foot_solref,
                                         self.contact.foot_solimp)
        return paper_code_mjcf(super()._mjcf_text(plank_length), contact)

    def depth_from(self, torso_pos: np.ndarray, torso_orn: np.ndarray) -> np.ndarray:
        """The image through the code's float32 arithmetic (`paper_code.code_depth`)."""
        return code_depth(super().depth_from(torso_pos, torso_orn), self.camera.far_m)

    def _terrain_poses(self, terrain: BoxTerrain) -> tuple[np.ndarray, np.ndarray, float]:  # type: ignore[override]
        pos, quat = box_poses(terrain)
        return pos, quat, terrain_top(terrain)

    def _settle_targets(self) -> np.ndarray:
        return settle_targets(self.clock)

    def _gait_targets(self, params: GaitParams, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
        return held_gait_targets(params, self.step_count, n_steps, self.clock,
                                 self.physics.time_step)

    def proprioception(self) -> np.ndarray:
        out = super().proprioception()
        out[:8] = wrap_angles(out[:8])
        return out
