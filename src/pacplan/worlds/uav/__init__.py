"""The UAV obstacle-field world of DESIGN.md: scenes, primitives, policy, two simulators.

Only `UAVWorld` is imported eagerly-light: torch and PyBullet load when a simulator is built.
"""

from pacplan.worlds.uav.world import Trajectory, UAVWorld

__all__ = ["Trajectory", "UAVWorld"]
