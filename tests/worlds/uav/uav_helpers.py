"""Shared fixtures for the UAV tests: hand-built scenes with known geometry."""

from __future__ import annotations

import numpy as np

from pacplan.worlds.uav import spec
from pacplan.worlds.uav.scene import Scene


def scene_with(
    cylinders: list[tuple[tuple[float, float, float], tuple[float, float, float], float]],
) -> Scene:
    """A scene whose first cylinders are given (centre, axis, radius); the rest are parked at
    x = 100 m, outside the walls, where neither simulator can see or touch them."""
    n = spec.N_OBSTACLES
    centres = np.tile([100.0, 5.0, 0.0], (n, 1))
    axes = np.tile([0.0, 0.0, 1.0], (n, 1))
    radii = np.full(n, 0.1)
    for i, (c, a, r) in enumerate(cylinders):
        a = np.asarray(a, dtype=np.float64) / np.linalg.norm(a)
        centres[i], axes[i], radii[i] = c, a, r
    quats = np.array([_quat_from_z(a) for a in axes])
    return Scene(-1, centres, axes, radii, quats, 1)


def _quat_from_z(a: np.ndarray) -> np.ndarray:
    """Unit quaternion (x, y, z, w) rotating ẑ onto a."""
    z = np.array([0.0, 0.0, 1.0])
    v = np.cross(z, a)
    w = 1.0 + float(z @ a)
    if w < 1e-12:
        return np.array([1.0, 0.0, 0.0, 0.0])
    q = np.array([v[0], v[1], v[2], w])
    return q / np.linalg.norm(q)
