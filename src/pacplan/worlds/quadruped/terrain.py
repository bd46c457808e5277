"""Rough terrain for the quadruped: a seed names a row of symmetric ridges across the path.

The profile is a pure function of x (constant across the 10 m wide strip): flat ground for the
first 0.5 m, then pairs of planks, the first rising and the second falling with the same slope, so
every ridge returns to ground level and heights never drift. Because the profile is piecewise
linear with kinks only at plank ends, a PyBullet heightfield whose x spacing is the plank length
represents it exactly (no steps, no smoothing) with few, large triangles: contact queries then
touch a handful of triangles per foot, which is most of what a simulated second costs.
`heights_on_grid` produces that grid.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pacplan.errors import PacplanError

FLAT_START_M = 0.5
RIDGES_END_M = 10.0
STRIP_WIDTH_M = 10.0
# Heightfield extent: behind the start (a policy may walk backwards) and past the ridges.
GRID_X_MIN_M = -5.0
GRID_X_MAX_M = 15.0
GRID_DY_M = 5.0


@dataclass(frozen=True)
class Terrain:
    """One sampled terrain: ridge start positions, slopes, and the profile they define."""

    seed: int
    plank_length: float
    slopes_deg: np.ndarray  # (n_ridges,) slope of both planks of ridge k, degrees

    @property
    def ridge_starts(self) -> np.ndarray:
        """x where each ridge leaves the ground (ridge k spans [start, start + 2·plank])."""
        return FLAT_START_M + 2.0 * self.plank_length * np.arange(len(self.slopes_deg))

    @property
    def peak_heights(self) -> np.ndarray:
        """Ridge crest heights plank·tan θ_k (m)."""
        return self.plank_length * np.tan(np.radians(self.slopes_deg))

    def height(self, x: np.ndarray | float) -> np.ndarray:
        """Ground height (m) at positions x; zero on the flat parts."""
        xs = np.asarray(x, dtype=np.float64)
        out = np.zeros_like(xs)
        length = self.plank_length
        for start, peak in zip(self.ridge_starts, self.peak_heights, strict=True):
            u = (xs - start) / length  # 0..1 rising plank, 1..2 falling plank
            tent = np.clip(1.0 - np.abs(u - 1.0), 0.0, None)
            out = out + peak * tent
        return out


def n_ridges(plank_length: float) -> int:
    """Whole ridges that fit between the flat start and x = 10 m."""
    return math.floor((RIDGES_END_M - FLAT_START_M) / (2.0 * plank_length) + 1e-9)


def sample_terrain(seed: int, max_slope_deg: float = 23.3, plank_length: float = 0.5) -> Terrain:
    """Draw the slopes θ_k ∼ U[0°, max_slope_deg] of every ridge from the environment seed."""
    seed = int(seed)
    if seed < 0:
        raise PacplanError(f"environment seeds must be non-negative, got {seed}")
    if not 0.0 <= max_slope_deg < 90.0:
        raise PacplanError(f"max_slope_deg must lie in [0, 90), got {max_slope_deg}")
    per_half_metre = FLAT_START_M / plank_length if plank_length > 0 else 0.0
    if plank_length <= 0 or abs(per_half_metre - round(per_half_metre)) > 1e-9:
        raise PacplanError(
            "plank_length must divide 0.5 m (0.5, 0.25, 0.1, ...) so that the heightfield grid "
            f"meets every plank end, got {plank_length}"
        )
    rng = np.random.default_rng(seed)
    slopes = rng.uniform(0.0, max_slope_deg, size=n_ridges(plank_length))
    return Terrain(seed=seed, plank_length=float(plank_length), slopes_deg=slopes)


def first_slopes_deg(seeds: np.ndarray, max_slope_deg: float = 23.3,
                     plank_length: float = 0.5) -> np.ndarray:
    """The first ridge's slope (`Terrain.slopes_deg[0]`) of each seed's terrain, without
    building the terrains' profiles."""
    return np.array([sample_terrain(int(s), max_slope_deg, plank_length).slopes_deg[0]
                     for s in np.asarray(seeds, dtype=np.int64).reshape(-1)], dtype=np.float64)


def grid_axes(plank_length: float) -> tuple[np.ndarray, np.ndarray]:
    """x and y sample positions of the heightfield; x steps by one plank, so every kink of
    the profile is a grid line."""
    nx = round((GRID_X_MAX_M - GRID_X_MIN_M) / plank_length) + 1
    ny = round(STRIP_WIDTH_M / GRID_DY_M) + 1
    xs = GRID_X_MIN_M + plank_length * np.arange(nx)
    ys = -STRIP_WIDTH_M / 2 + GRID_DY_M * np.arange(ny)
    return xs, ys


def heights_on_grid(terrain: Terrain) -> np.ndarray:
    """(ny, nx) heights, row j at y_j, column i at x_i."""
    xs, ys = grid_axes(terrain.plank_length)
    return np.tile(terrain.height(xs), (len(ys), 1))
