"""The batched simulator's geometry: analytic ray casting and sphere sweeps as tensor kernels.

Pure functions of tensors (no chunking, no state), so `BatchedSimulator` can compile them for one
static shape. The robot never rotates, so the 2,500 pixel rays are fixed; per scene the ray/axis
products are computed once, and a frame costs a handful of fused multiply-adds per
(pixel, cylinder). Float op order here fixes results to the bit: change it only on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from pacplan.worlds.uav import spec
from pacplan.worlds.uav.scene import Scene


class SceneTensors:
    """Scenes of a chunk of environments as tensors, with per-scene ray products precomputed."""

    def __init__(self, scenes: Sequence[Scene], rays: torch.Tensor, dtype: torch.dtype) -> None:
        dev = rays.device
        self.centres = torch.as_tensor(np.stack([s.centres for s in scenes]), device=dev)
        self.axes = torch.as_tensor(np.stack([s.axes for s in scenes]), device=dev)
        self.radii = torch.as_tensor(np.stack([s.radii for s in scenes]), device=dev)
        axes = self.axes.to(dtype)
        # da[e, k, p] = d_p · a_k ; a2[e, k, p] = |d_p ⊥ a_k|² (the quadratic's leading term).
        # Written elementwise (not einsum/matmul) so every value is computed the same way
        # whatever the chunk size: results never depend on how work was chunked.
        self.da = _dot3(axes[:, :, None, :], rays[None, None, :, :]).contiguous()
        self.a2 = ((rays * rays).sum(-1)[None, None, :] - self.da * self.da).contiguous()
        # da and a2 with pixels by column band, for the compiled simulator (batched.py)
        self.banded: tuple[torch.Tensor, ...] | None = None


def _dot3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Broadcast dot product over a last axis of length 3, as explicit products and sums."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def render_kernel(
    rays: torch.Tensor,  # (P, 3)
    da_all: torch.Tensor,  # (E, K, P) per scene
    a2_all: torch.Tensor,  # (E, K, P) per scene
    env: torch.Tensor,  # (F,) scene of each frame
    w: torch.Tensor,  # (F, K, 3) camera minus cylinder centre
    axes: torch.Tensor,  # (F, K, 3)
    radii: torch.Tensor,  # (F, K)
    cam: torch.Tensor,  # (F, 3)
) -> torch.Tensor:
    """z-depth (F, P) of the nearest hit among cylinders and the four tunnel planes, ≤ FAR.

    The per-scene tables are indexed inside the kernel so a fused (compiled) kernel reads them
    in place instead of materialising an (F, K, P) copy.
    """
    inf = torch.full((), float("inf"), dtype=rays.dtype, device=rays.device)
    da = da_all[env]
    a2 = a2_all[env]
    h = spec.OBST_HALF
    wa = _dot3(w, axes)  # (F, K)
    cq = _dot3(w, w) - wa * wa - radii * radii  # |w⊥|² − r²
    dw = _dot3(w[:, :, None, :], rays[None, None, :, :])
    b = dw - da * wa[..., None]  # d⊥·w⊥
    c = cq[..., None]
    disc = b * b - a2 * c
    t_side = (-b - torch.sqrt(disc.clamp_min(0))) / a2
    s = wa[..., None] + t_side * da
    ok = (disc >= 0) & (t_side > 0) & (s.abs() <= h)
    best = torch.where(ok, t_side, inf)
    for sign in (1.0, -1.0):
        t_cap = (sign * h - wa[..., None]) / da
        ok = (t_cap > 0) & (c + t_cap * (2 * b + t_cap * a2) <= 0)
        best = torch.minimum(best, torch.where(ok, t_cap, inf))
    return tunnel_planes(best.amin(dim=1), rays[:, 0][None, :], rays[:, 2][None, :], cam)


def tunnel_planes(near: torch.Tensor, dx: torch.Tensor, dz: torch.Tensor, cam: torch.Tensor
                  ) -> torch.Tensor:
    """z-depth (F, P) ≤ FAR: the nearest cylinder hits `near` (F, P) (+inf: none) against the
    two walls, the floor and the ceiling, for rays with x and z components dx, dz (1, P) from
    cameras cam (F, 3); every renderer ends with it, eager or compiled."""
    inf = float("inf")
    ox = cam[:, 0:1]
    oz = cam[:, 2:3]
    t_wall = torch.where(dx > 0, (spec.WALL_X - ox) / dx, (-spec.WALL_X - ox) / dx)
    t_flat = torch.where(dz > 0, (spec.CEIL_Z - oz) / dz, (spec.FLOOR_Z - oz) / dz)
    depth = torch.minimum(near, torch.where(dx != 0, t_wall, inf))
    depth = torch.minimum(depth, torch.where(dz != 0, t_flat, inf))
    return depth.clamp(max=spec.FAR)


def sweep_kernel(
    st: SceneTensors,
    env: torch.Tensor,  # (Q,) scene of each sweep
    pos: torch.Tensor,  # (Q, 3) float64 start of the primitive
    disp: torch.Tensor,  # (Q, 20, 3) float64 check offsets of the primitive flown
    pairs: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """First colliding check (1..20, 0 = none) of each (start, primitive) -> (Q,).

    Sphere vs solid finite cylinder by exact point-to-cylinder distance, in float64; the
    sphere touching a shape (distance ≤ radius) counts as a collision. pairs (sweep index (V,),
    cylinder index (V,)): test only these cylinders of these sweeps (the others are known not to
    touch any check, `cull.touchable`); each pair's distances are the same float ops as in the
    full (Q, 20, K) test, and a hit is an any over cylinders, so the result is the same.
    """
    p = pos[:, None, :] + disp  # (Q, 20, 3)
    if pairs is None:
        hit = _cylinder_hits(p[:, :, None, :], st.centres[env][:, None, :, :],
                             st.axes[env][:, None, :, :], st.radii[env][:, None, :]).any(-1)
    else:
        q, k = pairs
        e = env[q]
        one = _cylinder_hits(p[q][:, :, None, :], st.centres[e, k][:, None, None, :],
                             st.axes[e, k][:, None, None, :], st.radii[e, k][:, None, None])
        count = torch.zeros(p.shape[:2], dtype=torch.int32, device=p.device)
        hit = count.index_add_(0, q, one[..., 0].to(torch.int32)) > 0
    r = spec.ROBOT_RADIUS
    hit |= p[..., 0].abs() >= spec.WALL_X - r
    hit |= (p[..., 2] <= spec.FLOOR_Z + r) | (p[..., 2] >= spec.CEIL_Z - r)
    return torch.where(hit.any(-1), hit.to(torch.int8).argmax(-1) + 1, 0)


def _cylinder_hits(p: torch.Tensor, centres: torch.Tensor, axes: torch.Tensor,
                   radii: torch.Tensor) -> torch.Tensor:
    """The robot's sphere at points p (..., 1, 3) touches cylinders (..., K, 3) -> (..., K)."""
    wv = p - centres
    s = (wv * axes).sum(-1)
    rho = ((wv * wv).sum(-1) - s * s).clamp_min(0).sqrt()
    dr = (rho - radii).clamp_min(0)
    ds = (s.abs() - spec.OBST_HALF).clamp_min(0)
    return (dr * dr + ds * ds) <= spec.ROBOT_RADIUS**2
