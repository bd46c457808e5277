"""Seed -> obstacle field (docs/design.md §4.1), deterministic, with the safe-start rule.

Pure numpy so both simulators, the Gymnasium env and the figures share one scene per seed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pacplan.errors import PacplanError
from pacplan.worlds.uav import spec

MAX_ATTEMPTS = 10_000


@dataclass(frozen=True)
class Scene:
    """Cylinder centres (n, 3), unit axes (n, 3), radii (n,); half-length is spec.OBST_HALF
    (n = spec.N_OBSTACLES = 20 unless the world's `obstacles` option says otherwise)."""

    seed: int
    centres: np.ndarray
    axes: np.ndarray
    radii: np.ndarray
    quats: np.ndarray  # (n, 4) x, y, z, w — what PyBullet is given
    attempts: int


def axis_from_quat(q: np.ndarray) -> np.ndarray:
    """R(q)·ẑ for unit quaternions (..., 4) in (x, y, z, w) order."""
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)], axis=-1)


def point_cylinder_distance(
    p: np.ndarray, centres: np.ndarray, axes: np.ndarray, radii: np.ndarray
) -> np.ndarray:
    """Euclidean distance from points p (..., 3) to each solid finite cylinder -> (..., n).

    Exact for a solid cylinder with flat caps: split the offset into its axial part s and radial
    part rho; outside the slab and outside the radius the nearest point is on the cap rim.
    """
    w = p[..., None, :] - centres
    s = np.einsum("...kc,kc->...k", w, axes)
    rho = np.sqrt(np.maximum(np.einsum("...kc,...kc->...k", w, w) - s * s, 0.0))
    dr = np.maximum(rho - radii, 0.0)
    ds = np.maximum(np.abs(s) - spec.OBST_HALF, 0.0)
    return np.sqrt(dr * dr + ds * ds)


def sample_scene(seed: int, obstacles: int = spec.N_OBSTACLES, radius_scale: float = 1.0
                 ) -> Scene:
    """The scene of environment `seed`: draw 20 cylinders, redraw all until the start is clear.

    `obstacles` and `radius_scale` (radii drawn from spec.OBST_RADIUS, then multiplied) give
    shifted distributions for testing a deployed planner (docs/monitor.md); the defaults are
    the certified world, drawn exactly as before.

    The whole field is redrawn (not single cylinders) so the rule does not bias obstacle
    positions near the start in a cylinder-by-cylinder way; "within 1.25 m" is measured to the
    cylinder surface (exact solid-cylinder distance), not to its centre.
    """
    seed = int(seed)
    if seed < 0:
        raise PacplanError(f"environment seeds must be non-negative, got {seed}")
    rng = np.random.default_rng(seed)
    n = int(obstacles)
    start = np.array(spec.START)
    for attempt in range(1, MAX_ATTEMPTS + 1):
        x = rng.uniform(*spec.OBST_X, size=n)
        y = rng.uniform(*spec.OBST_Y, size=n)
        r = rng.uniform(*spec.OBST_RADIUS, size=n) * radius_scale
        qx = rng.normal(size=n)
        qz = rng.normal(size=n)
        q = np.stack([qx, np.zeros(n), qz, np.ones(n)], axis=1)
        q /= np.linalg.norm(q, axis=1, keepdims=True)
        centres = np.stack([x, y, np.zeros(n)], axis=1)
        axes = axis_from_quat(q)
        axes /= np.linalg.norm(axes, axis=1, keepdims=True)
        if point_cylinder_distance(start, centres, axes, r).min() >= spec.START_CLEARANCE:
            return Scene(seed, centres, axes, r, q, attempt)
    raise RuntimeError(f"no safe scene for seed {seed} in {MAX_ATTEMPTS} attempts")
