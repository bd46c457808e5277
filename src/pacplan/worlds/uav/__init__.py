"""The UAV obstacle-field world (docs/design.md §4): scenes, primitives, policy, two simulators.

The dynamics are written once (`dynamics`); the batched simulator, the PyBullet rollouts and the
Gymnasium env step through them and differ only in geometry (`scene_sim.SceneSimulator`).

Only `UAVWorld` is imported eagerly-light: torch and PyBullet load when a simulator is built.
"""

from pacplan.worlds.uav.world import Trajectory, UAVWorld

__all__ = ["Trajectory", "UAVWorld"]
