"""The paper's code's terrain: 25 pairs of tilted boxes whose tops form overlapping tents.

The paper's text describes ridges of planks; its public code (irom-lab/PAC-Vision-Planning at
ef4063c, `envs/Minitaur_Env.py`: `generate_steps`) built something else, and that is what its
published prior was trained and certified on. For the `quadruped` world's `variant:
paper-code` (`pacplan.worlds.quadruped.paper_code`) this module rebuilds it from the facts:

- per terrain, the legacy NumPy generator seeded with the environment seed
  (`np.random.seed(seed)`, i.e. `RandomState(seed)`), one draw per pair k = 0..24:
  θ_k = U[0, 1) · max_slope, max_slope = 35° · 2/3 (the code's `max_angle` 35 times 2/3);
- box half extents (l/2, 5, l/2) with l = 0.5 m; h = l·sin(π/4 − θ)/√2, d = √2·l·cos(π/4 + θ);
  box 1 of pair k at x = 0.5 + 0.5k, z = −h, pitched by −θ (Euler (0, −θ, 0)), box 2 at
  x + d, z = −h, pitched by +θ;
- the ground plane z = 0 of pybullet_envs' `MinitaurGymEnv` stays (the code's `generate_steps`
  never removes it; only its unused heightfield generator does), and a visual-only goal marker,
  a box of half extents (0.05, 5, 0.15) at (6, 0, 0), stands in the camera's view.

What the boxes make: the two boxes of a pair meet at a crest (x_k + l(cos θ − sin θ)/2,
l·sin θ) and their top faces (each one box edge l long) fall from it at slope θ to z = 0 at
± l·cos θ, so each pair is a tent of half-width l·cos θ ≥ 0.46 m; tents start every 0.5 m and
so overlap their neighbours. The
visible profile (`BoxTerrain.height`) is the upper envelope of the 25 tents and the plane.
Everything else of each box lies below that envelope or below z = 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pacplan.errors import PacplanError

N_PAIRS = 25  # the code's numObs
BOX_EDGE_M = 0.5  # l: the boxes are l × 10 m × l
BOX_HALF_EXTENTS = (BOX_EDGE_M / 2, 5.0, BOX_EDGE_M / 2)
FIRST_PAIR_X_M = 0.5
PAIR_SPACING_M = 0.5
PAPER_MAX_SLOPE_DEG = 35.0 * 2.0 / 3.0  # the code's max_angle (35°) times its factor 2/3
GOAL_MARKER_X_M = 6.0
GOAL_MARKER_HALF_EXTENTS = (0.05, 5.0, 0.15)  # visual only: seen by the camera, never touched


@dataclass(frozen=True)
class BoxTerrain:
    """One terrain of the paper's code: the tilt θ_k (radians) of each of the 25 box pairs."""

    seed: int
    thetas: np.ndarray  # (N_PAIRS,) radians

    @property
    def pair_x(self) -> np.ndarray:
        """x of each pair's first box centre."""
        return FIRST_PAIR_X_M + PAIR_SPACING_M * np.arange(self.thetas.size)

    @property
    def crest_x(self) -> np.ndarray:
        """x of each pair's crest (where its two boxes meet)."""
        c, s = np.cos(self.thetas), np.sin(self.thetas)
        return self.pair_x + 0.5 * BOX_EDGE_M * (c - s)

    @property
    def peak_heights(self) -> np.ndarray:
        """Crest heights l·sin θ_k above the plane (m)."""
        return BOX_EDGE_M * np.sin(self.thetas)

    @property
    def slopes_deg(self) -> np.ndarray:
        """θ_k in degrees."""
        return np.degrees(self.thetas)

    # The renderer draws a line at every ridge start + plank length: put it on the crests.
    plank_length = PAIR_SPACING_M

    @property
    def ridge_starts(self) -> np.ndarray:
        """Crest positions less one `plank_length` (so `ridge_starts + plank_length` are the
        crests, as for the text world's `Terrain`)."""
        return self.crest_x - self.plank_length

    def height(self, x: np.ndarray | float) -> np.ndarray:
        """Ground height (m) at x: the upper envelope of the tents and the plane z = 0."""
        xs = np.asarray(x, dtype=np.float64)
        out = np.zeros_like(xs)
        half_width = BOX_EDGE_M * np.cos(self.thetas)
        for cx, peak, w in zip(self.crest_x, self.peak_heights, half_width, strict=True):
            if peak <= 0.0:
                continue
            out = np.maximum(out, peak * (1.0 - np.abs(xs - cx) / w))
        return out

    def visible_crests(self, x_max: float = 6.5) -> np.ndarray:
        """Crests not buried under a neighbouring tent, up to `x_max` (their x positions)."""
        cx = self.crest_x
        keep = (cx <= x_max) & (self.peak_heights > 0.0)
        visible = np.isclose(self.height(cx), self.peak_heights, rtol=0.0, atol=1e-12)
        return cx[keep & visible]


def sample_box_terrain(seed: int, max_slope_deg: float = PAPER_MAX_SLOPE_DEG) -> BoxTerrain:
    """The paper's terrain `seed`: θ_k = U[0, 1)·max_slope from `RandomState(seed)`, in order."""
    seed = int(seed)
    if seed < 0 or seed >= 2**32:
        raise PacplanError(f"the paper-code terrain takes seeds in [0, 2**32) (NumPy's legacy "
                           f"generator, as its code seeded it), got {seed}")
    if not 0.0 <= max_slope_deg < 45.0:
        raise PacplanError(f"max_slope_deg must lie in [0, 45) for the box terrain (a pair's "
                           f"boxes stop meeting at a crest at 45°), got {max_slope_deg}")
    draws = np.random.RandomState(seed).random_sample(N_PAIRS)
    return BoxTerrain(seed=seed, thetas=draws * math.radians(max_slope_deg))


def first_slopes_deg(seeds: np.ndarray, max_slope_deg: float = PAPER_MAX_SLOPE_DEG
                     ) -> np.ndarray:
    """θ_0 in degrees (the first tent's slope, `BoxTerrain.slopes_deg[0]`) of each seed's
    terrain: the first draw of `RandomState(seed)`, one generator reseeded per seed, which is
    fast enough to classify a whole prior range (about 4 µs a seed) without building terrains."""
    sd = np.asarray(seeds, dtype=np.int64).reshape(-1)
    if sd.size and (int(sd.min()) < 0 or int(sd.max()) >= 2**32):
        raise PacplanError("the paper-code terrain takes seeds in [0, 2**32)")
    rng = np.random.RandomState()
    out = np.empty(sd.size, dtype=np.float64)
    scale = math.radians(max_slope_deg)
    for i, seed in enumerate(sd):
        rng.seed(int(seed))
        out[i] = rng.random_sample() * scale
    return np.degrees(out)


def box_poses(terrain: BoxTerrain) -> tuple[np.ndarray, np.ndarray]:
    """(50, 3) centres and (50, 4) quaternions (w, x, y, z) of the boxes, pair by pair."""
    l = BOX_EDGE_M  # noqa: E741 - the code's name for the edge
    n = terrain.thetas.size
    pos = np.zeros((2 * n, 3))
    quat = np.zeros((2 * n, 4))
    for k, (x, theta) in enumerate(zip(terrain.pair_x, terrain.thetas, strict=True)):
        theta = float(theta)
        h = l * math.sin(math.pi / 4 - theta) / math.sqrt(2.0)
        d = math.sqrt(2.0) * l * math.cos(math.pi / 4 + theta)
        for side, (dx, pitch) in enumerate(((0.0, -theta), (d, theta))):
            pos[2 * k + side] = (x + dx, 0.0, -h)
            quat[2 * k + side] = (math.cos(pitch / 2), 0.0, math.sin(pitch / 2), 0.0)
    return pos, quat
