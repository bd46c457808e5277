"""One scene at a time behind one small interface, whichever simulator draws it.

What a simulator adds to `dynamics` is geometry: the depth image at a position and the first
colliding check of a primitive. The Gymnasium env, the figures and the cross-validation need
exactly that, at single poses. `BulletSimulator` has this interface natively and
`batched.BatchedScene` gives it to the batched kernels; both are built once and reused.
Nothing heavy is imported until a simulator is opened.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from pacplan.validation import check_choice
from pacplan.worlds.uav.scene import Scene

SIMULATORS = ("batched", "bullet")


class SceneSimulator(Protocol):
    """Geometry of one loaded scene."""

    def load(self, scene: Scene) -> None:
        """Make `scene` the current scene."""
        ...

    def render(self, position: np.ndarray) -> np.ndarray:
        """z-depth image (50, 50) float32 in metres from the robot at `position` (3,)."""
        ...

    def sweep(self, position: np.ndarray, prim: int) -> int:
        """First colliding check (1..20, 0 = none) flying primitive `prim` from `position`."""
        ...

    def close(self) -> None:
        """Release what the simulator holds."""
        ...


def open_scene_simulator(simulator: str) -> SceneSimulator:
    """A new one-scene simulator by name ("batched" or "bullet"); `load` a scene before use."""
    check_choice("UAV simulator", simulator, SIMULATORS)
    if simulator == "bullet":
        from pacplan.worlds.uav.bullet import BulletSimulator

        return BulletSimulator()
    from pacplan.worlds.uav.batched import BatchedScene

    return BatchedScene()
