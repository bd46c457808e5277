"""Which cylinders can matter: conservative culling for the compiled simulator's kernels.

A (frame, cylinder) pair is culled only when no pixel can see the cylinder, and a (sweep,
cylinder) pair only when no collision check can touch it, with a margin (`MARGIN`, 1 cm) far
above the kernels' float error (float32 depths to about 1e-5 m, float64 distances to 1e-14 m).
Leaving a culled cylinder out of a minimum (depth) or of an any (hit) cannot change either, so
the kernels that skip culled pairs give the same bits as the kernels that test every pair.

The geometry, in float64:
- A cylinder is bounded by its axis segment c + s·a, |s| ≤ h, inflated by its radius r.
- Only the part inside the tunnel box matters while the camera (or the robot's sphere) is inside
  it: a ray reaches a point beyond a wall, the floor or the ceiling only after crossing that
  plane, whose depth the render kernel takes too, and a check whose sphere pokes through a plane
  is a collision whatever the cylinders are. So the segment is clipped to the box inflated by
  r + MARGIN (for rendering only when the camera is strictly inside the box).
- Rendering: a pixel's ray parameter is its z-depth t = forward·(p − cam) (the rays are scaled
  so), and a hit counts only when 0 < t; a depth of FAR or more is clamped to FAR, so a cylinder
  entirely behind the camera or entirely beyond FAR cannot change a pixel. Every ray lies in the
  pyramid spanned by the image's extreme rays, so a cylinder entirely outside one of its four
  side planes is never hit either.
- Sweeps: the checks of a primitive lie in an axis-aligned box; a cylinder whose bounding box is
  more than the robot's radius from it in x, y or z touches no check.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from pacplan.worlds.uav import spec

MARGIN = 0.01
"""Metres of slack on every culling test (the kernels' float error is below 1e-4 m)."""

_BIG = 1e9


def clip_axis(centres: torch.Tensor, axes: torch.Tensor, radii: torch.Tensor,
              clip: torch.Tensor | bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """Axis parameter range [lo, hi] (..., K) of the part of each cylinder near the tunnel box.

    Inside [-h, h], where the axis point c + s·a lies within the box x ∈ ±WALL_X, z ∈ [FLOOR_Z,
    CEIL_Z] inflated by r + MARGIN; lo > hi when no part does. clip (bool or (...) tensor):
    where False, the whole segment [-h, h].
    """
    h = spec.OBST_HALF
    lo = torch.full_like(radii, -h)
    hi = torch.full_like(radii, h)
    pad = radii + MARGIN
    for dim, (a_min, a_max) in ((0, (-spec.WALL_X, spec.WALL_X)),
                                (2, (spec.FLOOR_Z, spec.CEIL_Z))):
        c, a = centres[..., dim], axes[..., dim]
        low, high = a_min - pad, a_max + pad
        safe = torch.where(a == 0, torch.ones_like(a), a)
        s1, s2 = (low - c) / safe, (high - c) / safe
        inside = (c >= low) & (c <= high)
        s_lo = torch.where(a == 0, torch.where(inside, -_BIG, _BIG), torch.minimum(s1, s2))
        s_hi = torch.where(a == 0, torch.where(inside, _BIG, -_BIG), torch.maximum(s1, s2))
        lo, hi = torch.maximum(lo, s_lo), torch.minimum(hi, s_hi)
    if isinstance(clip, bool):
        return (lo, hi) if clip else (torch.full_like(radii, -h), torch.full_like(radii, h))
    keep = clip[..., None]
    return torch.where(keep, lo, -h), torch.where(keep, hi, h)


def _extent(offset: torch.Tensor, axial: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor,
            radial: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Min and max of n·(p − origin) over the clipped cylinder, given offset = n·(c − origin),
    axial = n·a and radial = r·|n| (a bound on the radial part)."""
    e1, e2 = lo * axial, hi * axial
    return offset + torch.minimum(e1, e2) - radial, offset + torch.maximum(e1, e2) + radial


def band_columns(bands: int) -> list[np.ndarray]:
    """The image columns of each of `bands` vertical bands (as equal as can be, left first)."""
    return np.array_split(np.arange(spec.IMG), bands)


@functools.lru_cache(maxsize=8)
def _planes(bands: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Unit normals n of the planes bounding what the pixels see: (3, 3) shared by every band
    (behind the camera, above the top row, below the bottom row) and (bands, 2, 3) per band (left
    of its first column, right of its last). A point q (relative to the camera) that a pixel of
    the band sees at depth t > 0 has n·q ≤ 0 for every one of them."""
    right, up, forward = (torch.as_tensor(v, dtype=torch.float64) for v in spec.camera_axes())
    rays = torch.as_tensor(spec.pixel_rays(), dtype=torch.float64)
    u = (rays @ right).reshape(spec.IMG, spec.IMG)  # depends on the column only
    v = rays @ up
    shared = torch.stack([-forward, up - v.max() * forward, v.min() * forward - up])
    sides = torch.stack([torch.stack([u[:, cols].min() * forward - right,
                                      right - u[:, cols].max() * forward])
                         for cols in band_columns(bands)])
    return shared / shared.norm(dim=-1, keepdim=True), sides / sides.norm(dim=-1, keepdim=True)


def visible(cam: torch.Tensor, centres: torch.Tensor, axes: torch.Tensor,
            radii: torch.Tensor, bands: int = 1) -> torch.Tensor:
    """(F, bands, K) bool: cylinder k of frame f may be seen by a pixel of column band b
    (`band_columns`) from camera position cam (F, 3) float64 (centres, axes (F, K, 3), radii
    (F, K), float64); False only when provably not."""
    shared, sides = (x.to(cam.device) for x in _planes(bands))
    return visible_within(cam, centres, axes, radii, shared, sides)


def visible_within(cam: torch.Tensor, centres: torch.Tensor, axes: torch.Tensor,
                   radii: torch.Tensor, shared: torch.Tensor, sides: torch.Tensor
                   ) -> torch.Tensor:
    """`visible` with the bounding planes given (`_planes`): tensors only, for torch.compile."""
    inside = ((cam[:, 0].abs() < spec.WALL_X) & (cam[:, 2] > spec.FLOOR_Z)
              & (cam[:, 2] < spec.CEIL_Z))
    lo, hi = clip_axis(centres, axes, radii, inside)
    keep = lo <= hi
    rel = centres - cam[:, None, :]
    for n in shared:  # behind the camera, above the top row, below the bottom row
        low, _ = _extent(rel @ n, axes @ n, lo, hi, radii)
        keep &= low <= MARGIN
    nearest, _ = _extent(-(rel @ shared[0]), -(axes @ shared[0]), lo, hi, radii)
    keep &= nearest < spec.FAR + MARGIN
    bands = sides.shape[0]
    flat = sides.reshape(-1, 3).t()  # (3, 2·bands)
    low, _ = _extent(rel @ flat, (axes @ flat), lo[..., None], hi[..., None], radii[..., None])
    ok = (low <= MARGIN).reshape(*keep.shape, bands, 2).all(-1)  # (F, K, bands)
    return keep[:, None, :] & ok.permute(0, 2, 1)


def touchable(box_lo: torch.Tensor, box_hi: torch.Tensor, centres: torch.Tensor,
              axes: torch.Tensor, radii: torch.Tensor) -> torch.Tensor:
    """(Q, K) bool: cylinder k may touch the robot's sphere at some point of the box [box_lo,
    box_hi] (Q, 3) of a primitive's checks (float64; centres, axes (Q, K, 3), radii (Q, K))."""
    lo, hi = clip_axis(centres, axes, radii)
    keep = lo <= hi
    reach = spec.ROBOT_RADIUS + MARGIN
    for dim in range(3):
        c_min, c_max = _extent(centres[..., dim], axes[..., dim], lo, hi, radii)
        keep &= (c_max >= box_lo[:, None, dim] - reach) & (c_min <= box_hi[:, None, dim] + reach)
    return keep


def slots(keep: torch.Tensor, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Slots of `width` cylinders covering each frame's kept ones: (frame (S,), cylinders (S,
    width)). A frame's kept cylinders come first in its slots; a last slot is filled up with
    cylinders that are not kept (or repeats), which change no minimum; frames keeping none get
    no slot."""
    n, k = keep.shape
    order = torch.sort((~keep).to(torch.int8), dim=1, stable=True).indices
    if k % width:
        order = torch.cat([order, order[:, :1].expand(n, width - k % width)], 1)
    per = (keep.sum(1) + width - 1) // width
    frame = torch.repeat_interleave(torch.arange(n, device=keep.device), per)
    group = torch.arange(frame.shape[0], device=keep.device) - (torch.cumsum(per, 0) - per)[frame]
    return frame, order.reshape(n, -1, width)[frame, group]
