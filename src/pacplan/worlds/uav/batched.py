"""The batched simulator: analytic ray casting and sphere collision in PyTorch, vectorised over
(environments × policies), on CPU or CUDA unchanged.

Why it is fast:
- The robot never rotates, so the 2,500 pixel rays are fixed; per scene the ray/axis products
  are computed once, and a frame costs a handful of fused multiply-adds per (pixel, cylinder).
- States live on an integer grid (step, ix, iz), so rollouts in the same state (the k policies of
  one environment share the start and often the first primitives) are rendered once, and
  (state, primitive) collision sweeps are computed once.
- Work is cut into fixed-size chunks, so memory is bounded whatever n × k is asked, and the
  render kernel sees one static shape (good for torch.compile).
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from pacplan.worlds.uav import policy as pol
from pacplan.worlds.uav import primitives as prims
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.results import RolloutResult, cost_from_checks
from pacplan.worlds.uav.scene import Scene, sample_scene


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


def _dot3(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Broadcast dot product over a last axis of length 3, as explicit products and sums."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _render_kernel(
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
    depth = best.amin(dim=1)  # (F, P)
    dx = rays[:, 0][None, :]
    dz = rays[:, 2][None, :]
    ox = cam[:, 0:1]
    oz = cam[:, 2:3]
    t_wall = torch.where(dx > 0, (spec.WALL_X - ox) / dx, (-spec.WALL_X - ox) / dx)
    t_flat = torch.where(dz > 0, (spec.CEIL_Z - oz) / dz, (spec.FLOOR_Z - oz) / dz)
    depth = torch.minimum(depth, torch.where(dx != 0, t_wall, inf))
    depth = torch.minimum(depth, torch.where(dz != 0, t_flat, inf))
    return depth.clamp(max=spec.FAR)


class BatchedSimulator:
    """Rolls k policies on n environments as chunked tensor programs.

    device: "cpu", "cuda" or "auto"; render_chunk: frames per render call (static shape);
    env_chunk, policy_chunk: environments and policies per rollout chunk; memory is bounded by
    about env_chunk · policy_chunk live images and net features, whatever n and k are.
    compile: fuse the render kernel with torch.compile. The compiled kernel is always called
    with exactly render_chunk frames and env_chunk scene tables (padded), so it compiles once
    and its results do not depend on how many rollouts a call asks for; if compilation fails
    the eager kernel is used. Compiled and eager kernels may differ in the last float bit, so
    `compile` is part of a world's configuration.
    threads: CPU threads for torch during a rollout call (0: leave torch's setting). Default 1:
    on a busy machine a 2-thread parallel region waits for a descheduled thread at every op
    (measured here: 1 thread 1,600-1,700 rollouts/s, 2 threads 375-505 with one other busy
    process), and parallel workers are the executors' job (one process per core).
    """

    def __init__(
        self,
        device: str = "cpu",
        render_chunk: int = 64,
        env_chunk: int = 32,
        compile: bool = False,
        dtype: torch.dtype = torch.float32,
        threads: int = 1,
        policy_chunk: int = 256,
    ) -> None:
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        self.device = torch.device(device)
        self.threads = int(threads)
        self.policy_chunk = int(policy_chunk)
        self.render_chunk = int(render_chunk)
        self.env_chunk = int(env_chunk)
        self.dtype = dtype
        self.rays = torch.as_tensor(spec.pixel_rays(), dtype=dtype, device=self.device)
        self.cells = pol.FilterCells(self.device)
        self.compiled = torch.compile(_render_kernel, dynamic=False) if compile else None
        self.features = torch.compile(pol.conv_features, dynamic=False) if compile else None
        self.net_chunk = 512
        self.check_disp = torch.as_tensor(prims.check_displacements(), device=self.device)
        dix, diz = prims.grid_step(np.arange(spec.N_PRIMS))
        self.dix = torch.as_tensor(dix, device=self.device)
        self.diz = torch.as_tensor(diz, device=self.device)
        self.cam_offset = torch.as_tensor(spec.CAM_OFFSET, dtype=torch.float64, device=self.device)

    # ----------------------------------------------------------------- geometry
    def scene_tensors(self, scenes: Sequence[Scene]) -> SceneTensors:
        return SceneTensors(scenes, self.rays, self.dtype)

    def render(self, st: SceneTensors, env: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Depth images (F, 50, 50) for robot positions pos (F, 3) in environments env (F,)."""
        n = env.shape[0]
        out = torch.empty(n, spec.IMG * spec.IMG, dtype=self.dtype, device=self.device)
        rc = self.render_chunk
        for i in range(0, n, rc):
            e = env[i : i + rc]
            cam = pos[i : i + rc] + self.cam_offset
            m = e.shape[0]
            if self.compiled is not None and m < rc:  # pad to the one static shape
                e = torch.cat([e, e[:1].expand(rc - m)])
                cam = torch.cat([cam, cam[:1].expand(rc - m, 3)])
            w = (cam[:, None, :] - st.centres[e]).to(self.dtype)
            args = (
                self.rays,
                st.da,
                st.a2,
                e,
                w,
                st.axes[e].to(self.dtype),
                st.radii[e].to(self.dtype),
                cam.to(self.dtype),
            )
            out[i : i + m] = self._kernel(*args)[:m]
        return out.reshape(n, spec.IMG, spec.IMG)

    def _kernel(self, *args: torch.Tensor) -> torch.Tensor:
        return self._compiled_or_eager("compiled", _render_kernel, "ray caster", *args)

    def _compiled_or_eager(self, attr: str, eager: Any, what: str, *args: torch.Tensor
                           ) -> torch.Tensor:
        """Call the compiled function in `attr`; if compiling fails, warn once and use eager."""
        fn = getattr(self, attr)
        if fn is not None:
            try:
                return fn(*args)
            except Exception as exc:  # pragma: no cover - no working compiler
                warnings.warn(
                    f"torch.compile failed ({exc!r}); using the eager {what}",
                    RuntimeWarning,
                    stacklevel=3,
                )
                setattr(self, attr, None)
        return eager(*args)

    def sweep(
        self, st: SceneTensors, env: torch.Tensor, pos: torch.Tensor, prim: torch.Tensor
    ) -> torch.Tensor:
        """First colliding check (1..20, 0 = none) flying primitives prim (Q,) from pos (Q, 3).

        Sphere vs solid finite cylinder by exact point-to-cylinder distance, in float64; the
        sphere touching a shape (distance ≤ radius) counts as a collision.
        """
        p = pos[:, None, :] + self.check_disp[prim]  # (Q, 20, 3)
        wv = p[:, :, None, :] - st.centres[env][:, None, :, :]  # (Q, 20, K, 3)
        s = (wv * st.axes[env][:, None, :, :]).sum(-1)
        rho = ((wv * wv).sum(-1) - s * s).clamp_min(0).sqrt()
        dr = (rho - st.radii[env][:, None, :]).clamp_min(0)
        ds = (s.abs() - spec.OBST_HALF).clamp_min(0)
        hit = ((dr * dr + ds * ds) <= spec.ROBOT_RADIUS**2).any(-1)
        r = spec.ROBOT_RADIUS
        hit |= p[..., 0].abs() >= spec.WALL_X - r
        hit |= (p[..., 2] <= spec.FLOOR_Z + r) | (p[..., 2] >= spec.CEIL_Z - r)
        first = torch.where(hit.any(-1), hit.to(torch.int8).argmax(-1) + 1, 0)
        return first

    def positions(self, step: int, ix: torch.Tensor, iz: torch.Tensor) -> torch.Tensor:
        return torch.stack(
            [
                spec.START[0] + spec.GRID * ix.double(),
                torch.full_like(ix, 0, dtype=torch.float64) + spec.START[1] + spec.SPEED * step,
                spec.START[2] + spec.GRID * iz.double(),
            ],
            dim=-1,
        )

    # ----------------------------------------------------------------- rollouts
    def rollout(
        self,
        thetas: np.ndarray,
        seeds: np.ndarray,
        use_net: bool = True,
        net_scale: float = pol.DEFAULT_NET_SCALE,
        forced: np.ndarray | None = None,
    ) -> RolloutResult:
        """Closed-loop rollouts of k policies on n environments (chunked over environments).

        forced (n, k, 12): replay these primitive sequences instead of choosing (thetas is then
        only used for its k).
        """
        with _torch_threads(self.threads if self.device.type == "cpu" else 0):
            return self._rollout(thetas, seeds, use_net, net_scale, forced)

    def _rollout(
        self,
        thetas: np.ndarray,
        seeds: np.ndarray,
        use_net: bool,
        net_scale: float,
        forced: np.ndarray | None,
    ) -> RolloutResult:
        thetas = np.asarray(thetas, dtype=np.float32)
        seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
        k = thetas.shape[0]
        th = torch.as_tensor(thetas, device=self.device)
        parts = pol.split_theta(th.to(self.dtype)) if use_net and forced is None else None
        chk = np.zeros((len(seeds), k), np.int64)
        pr = np.full((len(seeds), k, spec.N_STEPS), -1, np.int64)
        ec, pc = self.env_chunk, self.policy_chunk
        for j in range(0, k, pc):
            sub_parts = None
            if parts is not None:
                sub_parts = {name: v[j : j + pc] for name, v in parts.items()}
            kj = min(pc, k - j)
            for i in range(0, len(seeds), ec):
                f = None if forced is None else forced[i : i + ec, j : j + pc]
                c, p = self._rollout_chunk(seeds[i : i + ec], kj, sub_parts, net_scale, f)
                chk[i : i + ec, j : j + pc] = c
                pr[i : i + ec, j : j + pc] = p
        return RolloutResult(cost_from_checks(chk), chk, pr)

    def _rollout_chunk(
        self,
        seeds: np.ndarray,
        k: int,
        parts: dict[str, torch.Tensor] | None,
        net_scale: float,
        forced: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        dev = self.device
        n = len(seeds)
        scenes = [sample_scene(int(s)) for s in seeds]
        if self.compiled is not None:  # one static table shape for the compiled kernel
            scenes += [scenes[0]] * (self.env_chunk - n)
        st = self.scene_tensors(scenes)
        ix = torch.zeros(n, k, dtype=torch.long, device=dev)
        iz = torch.zeros(n, k, dtype=torch.long, device=dev)
        checks = torch.zeros(n, k, dtype=torch.long, device=dev)
        alive = torch.ones(n, k, dtype=torch.bool, device=dev)
        chosen = torch.full((n, k, spec.N_STEPS), -1, dtype=torch.long, device=dev)
        env_grid = torch.arange(n, device=dev)[:, None].expand(n, k)
        forced_t = None if forced is None else torch.as_tensor(forced, device=dev)
        span = 64  # grid coordinates fit comfortably in [-32, 32)
        for step in range(spec.N_STEPS):
            if not bool(alive.any()):
                break
            ea, xa, za = env_grid[alive], ix[alive], iz[alive]
            if forced_t is not None:
                prim = forced_t[..., step][alive]
            else:
                key = (ea * span + xa + span // 2) * span + za + span // 2
                ukey, inv = torch.unique(key, return_inverse=True)
                ue = ukey // (span * span)
                ux = (ukey // span) % span - span // 2
                uz = ukey % span - span // 2
                images = self.render(st, ue, self.positions(step, ux, uz))
                scores = self.cells.scores(images)[inv]
                if parts is not None:
                    scores = scores + net_scale * self._net(images, inv, alive, parts)
                prim = pol.choose(scores)
            chosen[..., step][alive] = prim
            # collision sweep, deduplicated over (env, state, primitive)
            skey = ((ea * span + xa + span // 2) * span + za + span // 2) * 32 + prim
            ukey, inv = torch.unique(skey, return_inverse=True)
            up = ukey % 32
            rest = ukey // 32
            ue = rest // (span * span)
            ux = (rest // span) % span - span // 2
            uz = rest % span - span // 2
            first = self.sweep(st, ue, self.positions(step, ux, uz), up)[inv]
            hit = first > 0
            new_checks = torch.where(hit, step * spec.CHECKS_PER_PRIM + first, 0)
            idx = alive.nonzero(as_tuple=True)
            checks[idx] = new_checks
            ix[idx] = xa + self.dix[prim]
            iz[idx] = za + self.diz[prim]
            alive[idx] = ~hit
        return checks.cpu().numpy(), chosen.cpu().numpy()

    def _net(
        self,
        images: torch.Tensor,
        inv: torch.Tensor,
        alive: torch.Tensor,
        parts: dict[str, torch.Tensor],
    ) -> torch.Tensor:
        """Net scores (R, 25) for the alive (env, policy) pairs, in alive order.

        The conv layers run per alive pair in fixed-size chunks (one static shape for the
        compiled kernel); the linear layers run on a dense (rows, k) grid so each policy's
        13k fc weights are used in place rather than copied per pair.
        """
        k = alive.shape[1]
        env_idx, pol_idx = alive.nonzero(as_tuple=True)
        n_alive = env_idx.shape[0]
        feats = torch.empty(n_alive, 529, dtype=images.dtype, device=images.device)
        nc = self.net_chunk
        for i in range(0, n_alive, nc):
            g, pi = inv[i : i + nc], pol_idx[i : i + nc]
            m = g.shape[0]
            if self.features is not None and m < nc:
                g = torch.cat([g, g[:1].expand(nc - m)])
                pi = torch.cat([pi, pi[:1].expand(nc - m)])
            args = (images[g], *pol.conv_weights(parts, pi))
            feats[i : i + m] = self._features(*args)[:m]
        has = alive.any(1)
        row_of = torch.cumsum(has.long(), 0) - 1
        grid = torch.zeros(int(has.sum()), k, 529, dtype=images.dtype, device=images.device)
        grid[row_of[env_idx], pol_idx] = feats
        return pol.head(grid, parts)[row_of[env_idx], pol_idx]

    def _features(self, *args: torch.Tensor) -> torch.Tensor:
        return self._compiled_or_eager("features", pol.conv_features, "net", *args)


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Run with n torch CPU threads (0: unchanged), restoring the previous setting."""
    before = torch.get_num_threads()
    if n > 0 and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n > 0 and n != before:
            torch.set_num_threads(before)


def render_positions(scene: Scene, positions: np.ndarray, device: str = "cpu") -> np.ndarray:
    """Convenience: depth images (F, 50, 50) float32 of one scene at robot positions (F, 3)."""
    sim = BatchedSimulator(device=device)
    st = sim.scene_tensors([scene])
    pos = torch.as_tensor(np.asarray(positions, dtype=np.float64).reshape(-1, 3), device=sim.device)
    env = torch.zeros(pos.shape[0], dtype=torch.long, device=sim.device)
    return sim.render(st, env, pos).cpu().numpy()


def sweep_primitive(scene: Scene, start: np.ndarray, prim: int) -> int:
    """Convenience: first colliding check (1..20, 0 = none) of one primitive from start."""
    sim = BatchedSimulator()
    st = sim.scene_tensors([scene])
    pos = torch.as_tensor(np.asarray(start, dtype=np.float64).reshape(1, 3))
    return int(sim.sweep(st, torch.zeros(1, dtype=torch.long), pos, torch.tensor([prim]))[0])
