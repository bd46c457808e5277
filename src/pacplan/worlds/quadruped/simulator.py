"""What the episode step needs from a physics engine: the interface both simulators provide.

`sim.MinitaurSim` (PyBullet) and `mujoco_sim.MujocoMinitaurSim` (MuJoCo) implement it, so the
episode dynamics (`episode`), the rollout and the Gym environment are written once for both.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from pacplan.worlds.quadruped.camera import CameraConfig
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.sim import PhysicsConfig, PrimitiveOutcome
from pacplan.worlds.quadruped.terrain import Terrain


class QuadrupedSim(Protocol):
    """A Minitaur simulator: reset to a terrain, sense, run a gait primitive."""

    physics: PhysicsConfig
    camera: CameraConfig
    step_count: int

    @property
    def time(self) -> float: ...

    def reset(self, terrain: Terrain) -> None: ...

    def close(self) -> None: ...

    def torso_pose(self) -> tuple[np.ndarray, np.ndarray]: ...

    def torso_x(self) -> float: ...

    def proprioception(self) -> np.ndarray: ...

    def depth_image(self) -> np.ndarray: ...

    def is_fallen(self) -> bool: ...

    def run_primitive(
        self,
        params: GaitParams,
        duration_s: float,
        finish_x: float | None = None,
        record_path: bool = False,
    ) -> PrimitiveOutcome: ...
