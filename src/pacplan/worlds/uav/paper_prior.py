"""The paper's published UAV prior flown by pacplan's policy: a yardstick for pacplan's world.

The paper's net has pacplan's layers and weight order (13,943 weights) but differs in three
ways, each undone here so that pacplan's policy scores primitives exactly as the paper's did:
- it reads depth in metres where pacplan's reads depth / FAR, so its first-layer weights are
  multiplied by FAR (w · d = (FAR · w) · (d / FAR); the bias is unchanged);
- its scores are 1000 × the net's output (`PAPER_NET_SCALE`, pacplan's `net_scale`);
- its output 5r + c belongs to the Depth Filter's image-grid cell in row r (from the top),
  column c, which is primitive |4 − r| + 5c, so the last layer's rows are permuted.
Its Depth Filter is a regular grid of 5 × 5-pixel cells (rows 9-33, columns 13-37) where
pacplan's centres each cell on the primitive's projected end point (`paper_filter_cells`).

The m policies are drawn as the paper's code drew them: `torch.manual_seed(0)`, one
(m, 13943) block of standard normals, θ = μ + exp(logvar / 2) · ε in float32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from pacplan.errors import PacplanError
from pacplan.worlds.uav import spec

PAPER_NET_SCALE = 1000.0
"""The paper's net output multiplier (its `1e3 * self.output(...)`)."""
GRID_TOP_LEFT = (9, 13)
"""The paper's Depth Filter reads depth[9:34, 13:38] as a 5 × 5 grid of 5 × 5-pixel cells."""
PRIOR_NAMES = ("mu_quadrotor_best.npy", "logvar_quadrotor_best.npy")


def grid_to_primitive() -> np.ndarray:
    """(25,) pacplan's primitive index of the paper's output 5r + c: |4 − r| + 5c."""
    k = np.arange(spec.N_PRIMS)
    return np.abs(4 - k // 5) + 5 * (k % 5)


def paper_filter_cells() -> np.ndarray:
    """(25, 2) top-left (row, col) of the paper's Depth Filter cell of each pacplan primitive."""
    k = np.arange(spec.N_PRIMS)
    top_left = np.stack([GRID_TOP_LEFT[0] + spec.CELL * (k // 5),
                         GRID_TOP_LEFT[1] + spec.CELL * (k % 5)], axis=1)
    out = np.empty_like(top_left)
    out[grid_to_primitive()] = top_left
    return out


def to_pacplan(thetas: np.ndarray) -> np.ndarray:
    """Paper-layout weights (..., 13943) -> pacplan's: conv1 weights × FAR, fc2 rows permuted."""
    th = np.array(thetas, dtype=np.float32, copy=True)
    if th.shape[-1:] != (spec.POLICY_DIM,):
        raise PacplanError(f"the paper's UAV weights have {spec.POLICY_DIM} values in the last "
                           f"axis, got shape {th.shape}")
    offsets, i = {}, 0
    for name, shape in spec.NET_SHAPES:
        offsets[name] = (i, shape)
        i += int(np.prod(shape))
    lo, shape = offsets["conv1.weight"]
    th[..., lo : lo + int(np.prod(shape))] *= np.float32(spec.FAR)
    perm = grid_to_primitive()  # output k of the paper -> primitive perm[k]
    lo, _ = offsets["fc2.weight"]
    w = th[..., lo : lo + 625].reshape(*th.shape[:-1], 25, 25).copy()
    mapped = np.empty_like(w)
    mapped[..., perm, :] = w
    th[..., lo : lo + 625] = mapped.reshape(*th.shape[:-1], 625)
    lo, _ = offsets["fc2.bias"]
    b = th[..., lo : lo + 25].copy()
    th[..., lo + perm] = b
    return th


def load_paper_prior(directory: Path) -> tuple[np.ndarray, np.ndarray]:
    """(μ, logvar) float32 (13943,) from the converted `.npy` files in `directory`."""
    out = []
    for name in PRIOR_NAMES:
        path = Path(directory) / name
        if not path.is_file():
            raise PacplanError(f"{path} not found; run `pacplan data paper` (or set "
                               "PACPLAN_PAPER_DATA to a folder holding it)")
        try:
            a = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise PacplanError(f"{path}: not a readable .npy file ({exc})") from None
        if a.shape != (spec.POLICY_DIM,) or a.dtype != np.float32 or not np.isfinite(a).all():
            raise PacplanError(f"{path}: expected {spec.POLICY_DIM} finite float32 values, got "
                               f"shape {a.shape} {a.dtype}")
        out.append(a)
    return out[0], out[1]


def paper_draws(mu: np.ndarray, logvar: np.ndarray, m: int = 50, seed: int = 0) -> np.ndarray:
    """(m, 13943) float32 policies in the paper's layout, drawn as its cost-matrix code did."""
    gen = torch.Generator().manual_seed(seed)  # the same stream as torch.manual_seed(seed)
    eps = torch.randn((m, mu.size), generator=gen)
    mu_t = torch.as_tensor(np.asarray(mu, np.float32))
    std = (0.5 * torch.as_tensor(np.asarray(logvar, np.float32))).exp()
    return (mu_t + std * eps).numpy()
