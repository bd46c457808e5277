"""Minitaur quadruped on rough ridge terrain (PyBullet), behind the `World` interface."""

from pacplan.worlds.quadruped.world import QuadrupedWorld

__all__ = ["QuadrupedWorld"]
