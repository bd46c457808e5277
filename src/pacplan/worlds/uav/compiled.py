"""The compiled path's kernels: the eager references' float ops, laid out for torch inductor.

`BatchedSimulator(compile=True)` runs these instead of `raycast.render_kernel` and
`policy.conv_features`. Every output value is computed by exactly the same IEEE float32 ops in
the same order as the compiled references (inductor builds with -ffp-contract=off, so each op
rounds once); only the memory layout and loop structure change, which is what makes them faster:
- `render_kernel` unrolls the cylinder loop, so the per-pixel minimum stays in registers instead
  of materialising an (F, K, P) buffer, and reads ray components as contiguous rows.
  `slot_kernel` is its loop for a few cylinders over one column band of a frame: the simulator
  gives it only the (frame, band, cylinder) triples `cull.visible` keeps (about a sixth of them
  at the tight run's scale) and takes the minimum over a frame's slots; `finish` adds the
  tunnel planes, the clamp and the net input.
- the conv layers read a polyphase copy of the normalised image (`phases`): the stride-2 taps of
  conv1 become contiguous slices, so inductor vectorises them, and conv1's ELU is computed once
  per hidden value instead of once per conv2 tap. `conv_at` reads each pair's frame through
  its index (no gathered copy) and runs both layers in one call.
The minimum over cylinders is order-independent because no candidate is NaN (a failed test
gives +inf), so unrolling it keeps every depth to the bit. `tests/worlds/uav/test_batched_fast.py`
checks all of this bit for bit against the references. Not for eager use: eager ATen ops (e.g.
its float32 sqrt) round differently, so the eager simulator keeps the reference kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from pacplan.worlds.uav import spec
from pacplan.worlds.uav.raycast import _dot3, tunnel_planes

HALF = spec.IMG // 2  # each polyphase component is HALF × HALF pixels


def render_kernel(
    rays_t: torch.Tensor,  # (3, P) ray components as contiguous rows
    da_all: torch.Tensor,  # (E, K, P) per scene
    a2_all: torch.Tensor,  # (E, K, P) per scene
    env: torch.Tensor,  # (F,) scene of each frame
    w: torch.Tensor,  # (F, K, 3) camera minus cylinder centre
    axes: torch.Tensor,  # (F, K, 3)
    radii: torch.Tensor,  # (F, K)
    cam: torch.Tensor,  # (F, 3)
) -> torch.Tensor:
    """z-depth (F, P) ≤ FAR: `raycast.render_kernel` with the cylinder loop unrolled."""
    inf = float("inf")
    wa = _dot3(w, axes)  # (F, K)
    cq = _dot3(w, w) - wa * wa - radii * radii
    dx, dy, dz = rays_t[0][None, :], rays_t[1][None, :], rays_t[2][None, :]
    depth = torch.full((), inf, dtype=rays_t.dtype, device=rays_t.device)
    for k in range(da_all.shape[1]):
        dw = w[:, k, 0, None] * dx + w[:, k, 1, None] * dy + w[:, k, 2, None] * dz
        hit = _cylinder_hit(da_all[env, k], a2_all[env, k], wa[:, k, None], cq[:, k, None], dw)
        depth = torch.minimum(depth, hit)
    return tunnel_planes(depth, dx, dz, cam)


def _cylinder_hit(da: torch.Tensor, a2: torch.Tensor, wak: torch.Tensor, c: torch.Tensor,
                  dw: torch.Tensor) -> torch.Tensor:
    """Nearest hit (.., P) (+inf: none) of one cylinder per row: its side, then its two caps,
    by `raycast.render_kernel`'s float ops (da = d·a, a2 = |d⊥|², wak = w·a, c = |w⊥|² − r²,
    dw = d·w); the one body both unrolled kernels run per cylinder."""
    inf = float("inf")
    h = spec.OBST_HALF
    b = dw - da * wak
    disc = b * b - a2 * c
    t_side = (-b - torch.sqrt(disc.clamp_min(0))) / a2
    s = wak + t_side * da
    ok = (disc >= 0) & (t_side > 0) & (s.abs() <= h)
    best = torch.where(ok, t_side, inf)
    for sign in (1.0, -1.0):
        t_cap = (sign * h - wak) / da
        ok = (t_cap > 0) & (c + t_cap * (2 * b + t_cap * a2) <= 0)
        best = torch.minimum(best, torch.where(ok, t_cap, inf))
    return best


def slot_kernel(
    rays_b: torch.Tensor,  # (3, T, Pt) ray components of each column band's pixels
    da_b: torch.Tensor,  # (E, K, T, Pt) per scene, pixels by band
    a2_b: torch.Tensor,  # (E, K, T, Pt) per scene, pixels by band
    centres: torch.Tensor,  # (E, K, 3) float64 per scene
    axes_all: torch.Tensor,  # (E, K, 3) float64 per scene
    radii_all: torch.Tensor,  # (E, K) float64 per scene
    env: torch.Tensor,  # (S,) scene of each slot
    band: torch.Tensor,  # (S,) column band of each slot
    cyl: torch.Tensor,  # (S, G) cylinders of each slot
    cam: torch.Tensor,  # (S, 3) float64 camera position of each slot's frame
) -> torch.Tensor:
    """Nearest cylinder hit (S, Pt) (+inf: none) among G cylinders, over one column band of a
    frame's pixels; not clamped.

    `render_kernel`'s cylinder loop for a slot's own G cylinders and pixels (the batched
    simulator gives each (frame, band) only the cylinders `cull.visible` keeps, G at a time,
    and takes the minimum over its slots); every candidate depth is computed by the same float
    ops from the same values as there (the tables are only reordered).
    """
    inf = float("inf")
    dt = rays_b.dtype
    w = (cam[:, None, :] - centres[env[:, None], cyl]).to(dt)  # (S, G, 3), as the eager caller
    axes = axes_all[env[:, None], cyl].to(dt)
    radii = radii_all[env[:, None], cyl].to(dt)
    wa = _dot3(w, axes)  # (S, G)
    cq = _dot3(w, w) - wa * wa - radii * radii
    dx, dy, dz = rays_b[0][band], rays_b[1][band], rays_b[2][band]  # (S, Pt)
    depth = torch.full((), inf, dtype=dt, device=rays_b.device)
    for g in range(cyl.shape[1]):
        dw = w[:, g, 0, None] * dx + w[:, g, 1, None] * dy + w[:, g, 2, None] * dz
        hit = _cylinder_hit(da_b[env, cyl[:, g], band], a2_b[env, cyl[:, g], band],
                            wa[:, g, None], cq[:, g, None], dw)  # (S, Pt)
        depth = torch.minimum(depth, hit)
    return depth


def finish(rays_t: torch.Tensor, near: torch.Tensor, cam: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """The frames' depth (F, P) and net input (`phases`) from their nearest cylinder hits
    (F, P): `render_kernel`'s tunnel planes and clamp, then `phases`, in one kernel."""
    depth = tunnel_planes(near, rays_t[0][None, :], rays_t[2][None, :], cam)
    return depth, phases(depth)


def phases(depth: torch.Tensor) -> torch.Tensor:
    """Depth (F, P) metres -> the net's input depth / FAR as polyphase (F, 2, 2, 25, 25).

    out[f, a, b, i, j] = depth[f, row 2i + a, col 2j + b] / FAR: the same division as
    `policy.conv_features` does, once per rendered frame rather than once per (frame, policy).
    """
    x = depth.reshape(-1, HALF, 2, HALF, 2).permute(0, 2, 4, 1, 3).contiguous()
    return x / spec.FAR


def conv1(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor) -> torch.Tensor:
    """ELU(conv1) (R, 2, 24, 24) from polyphase inputs (R, 2, 2, 25, 25); taps in the
    reference's order, tap (a, b) = phase (a % 2, b % 2) shifted by (a // 2, b // 2)."""
    n = HALF - 1
    hidden = []
    for c in range(2):
        acc = b1[:, c, None, None]
        for a in range(4):
            for b in range(4):
                tap = x[:, a % 2, b % 2, a // 2 : a // 2 + n, b // 2 : b // 2 + n]
                acc = acc + w1[:, c, a, b, None, None] * tap
        hidden.append(F.elu(acc))
    return torch.stack(hidden, 1)


def conv1_at(xp: torch.Tensor, rows: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor
             ) -> torch.Tensor:
    """`conv1` of the polyphase inputs xp[rows]: the gather is fused into the conv's loop
    (xp's first dimension is dynamic, so one compiled kernel serves every frame count)."""
    return conv1(xp[rows], w1, b1)


def conv_at(xp: torch.Tensor, rows: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
            w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """`conv2` ∘ `conv1_at` in one compiled call (features (R, 529))."""
    return conv2(conv1_at(xp, rows, w1, b1), w2, b2)


def conv2(hidden: torch.Tensor, w2: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:
    """ELU(conv2) features (R, 529) from conv1's output (R, 2, 24, 24), reference tap order."""
    n = HALF - 2
    acc = b2[:, None, None]
    for c in range(2):
        for a in range(2):
            for b in range(2):
                acc = acc + w2[:, c, a, b, None, None] * hidden[:, c, a : a + n, b : b + n]
    return F.elu(acc).reshape(-1, n * n)
