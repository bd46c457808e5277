"""The batched simulator: UAV rollouts of k policies on n environments as chunked tensor programs,
on CPU or CUDA unchanged. Geometry is in `raycast`, the state and its transition in `dynamics`;
this module schedules the work. Why it is fast:
- States live on an integer grid (`dynamics.GridState`), so rollouts in the same state (the k
  policies of one environment share the start and often the first primitives) are rendered
  once, and (state, primitive) collision sweeps are computed once.
- Work is cut into fixed-size chunks, so memory is bounded whatever n × k is asked, and the
  render kernel sees one static shape (good for torch.compile).
- Compiled, only what can matter is computed (`cull`): a frame's cylinders that some pixel of a
  column band may see, and the cylinders a primitive's checks may touch; the rest provably
  changes no depth and no hit, so the bits are those of the full kernels.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch

from pacplan.worlds.uav import compiled as fast
from pacplan.worlds.uav import conv_policy, cull, raycast, spec
from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import policy as pol
from pacplan.worlds.uav.device import resolve_device
from pacplan.worlds.uav.families import PAPER_FAMILY, PolicyFamily
from pacplan.worlds.uav.raycast import SceneTensors
from pacplan.worlds.uav.results import RolloutResult, cost_from_checks
from pacplan.worlds.uav.scene import Scene, sample_scene

_SPAN = 64  # grid coordinates fit comfortably in [-32, 32): keys below are exact integers
_Live = tuple[torch.Tensor, torch.Tensor, torch.Tensor]  # (env, ix, iz) of the living rollouts
_FAILED_TO_COMPILE: set[tuple[str, str]] = set()  # (function, device): a retry fails as slowly


def _state_key(env: torch.Tensor, ix: torch.Tensor, iz: torch.Tensor) -> torch.Tensor:
    """One integer per (environment, grid cell) of the current step, for deduplication."""
    return (env * _SPAN + ix + _SPAN // 2) * _SPAN + iz + _SPAN // 2


def _key_state(key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(environment, ix, iz) back from `_state_key`."""
    return key // (_SPAN * _SPAN), (key // _SPAN) % _SPAN - _SPAN // 2, key % _SPAN - _SPAN // 2


class BatchedSimulator:
    """Rolls k policies on n environments as chunked tensor programs.

    device: "cpu", "cuda" or "auto"; render_chunk: frames per render call (static shape);
    env_chunk, policy_chunk: environments and policies per rollout chunk; memory is bounded by
    about env_chunk · policy_chunk live images and net features, whatever n and k are.
    compile: run the kernels of `compiled` (render, net input, conv layers) with torch.compile.
    They are always called with static shapes (slot_chunk slots, finish_chunk frames, env_chunk
    scene tables, net_chunk images; padded), so each compiles once and results do not depend on
    how many rollouts a call asks for; if compilation fails they run eagerly. Compiled and eager
    kernels may differ in the last float bit, so `compile` is part of a world's
    configuration.
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
        obstacles: int = spec.N_OBSTACLES,
        radius_scale: float = 1.0,
    ) -> None:
        self.device = resolve_device(device)
        self.threads = int(threads)
        self.policy_chunk = int(policy_chunk)
        self.render_chunk = int(render_chunk)
        self.env_chunk = int(env_chunk)
        self.scene_options = {"obstacles": int(obstacles), "radius_scale": float(radius_scale)}
        self.dtype = dtype
        self.compile = bool(compile)
        self.rays = torch.as_tensor(spec.pixel_rays(), dtype=dtype, device=self.device)
        self.rays_t = self.rays.t().contiguous()
        self.cells = pol.FilterCells(self.device)
        self.compiled = _compile(fast.slot_kernel) if compile else None
        self.finish = _compile(fast.finish) if compile else None
        # culling is conservative by a margin, so its own rounding may differ from eager's
        self.visible = torch.compile(cull.visible_within, dynamic=True) if compile else None
        self.conv = _compile(fast.conv_at) if compile else None
        self.net_chunk = 512
        # the compiled ray caster: (frame, column band) pairs, slot_width cylinders at a time
        self.bands, self.slot_width, self.slot_chunk = 5, 2, 8 * self.render_chunk
        assert spec.IMG % self.bands == 0, "column bands of equal width"
        perm = np.concatenate([(np.arange(spec.IMG)[:, None] * spec.IMG + cols).ravel()
                               for cols in cull.band_columns(self.bands)])
        self.band_pixels = torch.as_tensor(perm, device=self.device)  # pixels by band
        self.rays_b = self.rays_t[:, self.band_pixels].reshape(3, self.bands, -1).contiguous()
        self.planes = tuple(x.to(self.device) for x in cull._planes(self.bands))
        self.finish_chunk = 4 * self.render_chunk  # frames per call of compiled.finish
        self.check_disp = torch.tensor(dyn.CHECK_DISP, device=self.device)
        self.cam_offset = torch.as_tensor(spec.CAM_OFFSET, dtype=torch.float64, device=self.device)

    def scene_tensors(self, scenes: Sequence[Scene]) -> SceneTensors:
        return SceneTensors(scenes, self.rays, self.dtype)

    def render(self, st: SceneTensors, env: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """Depth images (F, 50, 50) for robot positions pos (F, 3) in environments env (F,)."""
        return self._render(st, env, pos)[0]

    def _render(self, st: SceneTensors, env: torch.Tensor, pos: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Depth images (F, 50, 50) and, when compiled, the net's polyphase inputs (F, 2, 2, 25,
        25) (`compiled.phases`, made here per frame rather than per (frame, policy) later)."""
        if self.compile:
            return self._render_culled(st, env, pos)
        n = env.shape[0]
        out = torch.empty(n, spec.IMG * spec.IMG, dtype=self.dtype, device=self.device)
        rc = self.render_chunk
        for i in range(0, n, rc):
            e = env[i : i + rc]
            cam = pos[i : i + rc] + self.cam_offset
            w = (cam[:, None, :] - st.centres[e]).to(self.dtype)
            axes, radii = st.axes[e].to(self.dtype), st.radii[e].to(self.dtype)
            out[i : i + rc] = raycast.render_kernel(self.rays, st.da, st.a2, e, w, axes, radii,
                                                    cam.to(self.dtype))
        return out.reshape(n, spec.IMG, spec.IMG), None

    def _render_culled(self, st: SceneTensors, env: torch.Tensor, pos: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """The compiled renderer: each frame's cylinders that `cull.visible` keeps, in slots of
        `slot_width` (`compiled.slot_kernel`), their minimum per frame, then the tunnel planes,
        clamp and net input (`compiled.finish`). The same bits as `raycast.render_kernel`
        compiled: a culled cylinder changes no pixel, and a minimum does not depend on order."""
        n, dev, dt = env.shape[0], self.device, self.dtype
        cam = pos + self.cam_offset
        vis = self._compiled_or_eager("visible", cull.visible_within, "culling", cam,
                                      st.centres[env], st.axes[env], st.radii[env],
                                      *self.planes)
        row, cyl = cull.slots(vis.reshape(n * self.bands, -1), self.slot_width)
        n_slots, sc = row.shape[0], self.slot_chunk
        pad = -n_slots % sc  # to whole calls of the one static shape
        row_p = torch.cat([row, row[:1].expand(pad)]) if n_slots else row
        cyl_p = torch.cat([cyl, cyl[:1].expand(pad, cyl.shape[1])]) if n_slots else cyl
        frame_p, band_p = row_p // self.bands, row_p % self.bands
        env_p, cam_p = env[frame_p], cam[frame_p]
        da_b, a2_b = self._banded(st)
        width = self.rays_b.shape[-1]
        hits = torch.empty(row_p.shape[0], width, dtype=dt, device=dev)
        for i in range(0, row_p.shape[0], sc):
            hits[i : i + sc] = self._compiled_or_eager(
                "compiled", fast.slot_kernel, "ray caster", self.rays_b, da_b, a2_b,
                st.centres, st.axes, st.radii, env_p[i : i + sc], band_p[i : i + sc],
                cyl_p[i : i + sc], cam_p[i : i + sc])
        fc = self.finish_chunk
        n_pad = n + (-n % fc)  # frames padded to whole calls of `finish` (their rows stay inf)
        near = torch.full((n_pad * self.bands, width), float("inf"), dtype=dt, device=dev)
        near.scatter_reduce_(0, row[:, None].expand(n_slots, width), hits[:n_slots], "amin")
        # pixels by band (frame, band, row, column) -> image order (frame, row, band, column)
        near = near.reshape(n_pad, self.bands, spec.IMG, -1).transpose(1, 2).reshape(n_pad, -1)
        cam = torch.cat([cam, cam[:1].expand(n_pad - n, 3)]).to(dt)
        parts = [self._compiled_or_eager("finish", fast.finish, "ray caster", self.rays_t,
                                         near[i : i + fc], cam[i : i + fc])
                 for i in range(0, n_pad, fc)]
        out, xp = parts[0] if len(parts) == 1 else (torch.cat(p) for p in zip(*parts))
        # xp has n_pad ≥ 2 rows: conv_at's dynamic frame dimension is never specialised to 0, 1
        out = out[:n]
        return out.reshape(n, spec.IMG, spec.IMG), xp

    def _banded(self, st: SceneTensors) -> tuple[torch.Tensor, torch.Tensor]:
        """The scene tables' da and a2 (E, K, bands, pixels) with pixels by column band (the
        same values, reordered), made once per chunk of scenes."""
        if st.banded is None:
            e, k = st.da.shape[:2]
            st.banded = tuple(t[..., self.band_pixels].reshape(e, k, self.bands, -1).contiguous()
                              for t in (st.da, st.a2))
        return st.banded[0], st.banded[1]

    def _compiled_or_eager(self, attr: str, eager: Any, what: str, *args: torch.Tensor
                           ) -> torch.Tensor:
        """The compiled function in `attr`; if compiling fails, warn once a process, use eager."""
        key = (attr, str(self.device))
        fn = None if key in _FAILED_TO_COMPILE else getattr(self, attr)
        if fn is not None:
            try:
                return fn(*args)
            except Exception as exc:  # pragma: no cover - no working compiler
                warnings.warn(
                    f"torch.compile failed ({exc!r}); using the eager {what}",
                    RuntimeWarning,
                    stacklevel=3,
                )
                _FAILED_TO_COMPILE.add(key)
        return eager(*args)

    def sweep(
        self, st: SceneTensors, env: torch.Tensor, pos: torch.Tensor, prim: torch.Tensor
    ) -> torch.Tensor:
        """First colliding check (1..20, 0 = none) flying primitives prim (Q,) from pos (Q, 3)."""
        return raycast.sweep_kernel(st, env, pos, self.check_disp[prim])

    def positions(self, step: int, ix: torch.Tensor, iz: torch.Tensor) -> torch.Tensor:
        """World positions (Q, 3) float64 of grid cells (ix, iz) after `step` primitives."""
        x, y, z = dyn.grid_coords(step, ix.double(), iz.double())
        y = torch.as_tensor(y, dtype=torch.float64, device=x.device)
        return torch.stack(torch.broadcast_tensors(x, y, z), dim=-1)

    def rollout(
        self,
        thetas: np.ndarray,
        seeds: np.ndarray,
        use_net: bool = True,
        net_scale: float = pol.DEFAULT_NET_SCALE,
        forced: np.ndarray | None = None,
        family: PolicyFamily = PAPER_FAMILY,
    ) -> RolloutResult:
        """Closed-loop rollouts of k policies on n environments (chunked over environments).

        forced (n, k, 12): replay these primitive sequences instead of choosing (thetas is then
        only used for its k). family: the net θ parametrises (`families`; default the paper's).
        """
        with torch_threads_scope(self.threads if self.device.type == "cpu" else 0):
            return self._rollout(thetas, seeds, use_net, net_scale, forced, family)

    def _rollout(self, thetas: np.ndarray, seeds: np.ndarray, use_net: bool, net_scale: float,
                 forced: np.ndarray | None, family: PolicyFamily) -> RolloutResult:
        thetas = np.asarray(thetas, dtype=np.float32)
        seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
        k = thetas.shape[0]
        th = torch.as_tensor(thetas, device=self.device).to(self.dtype)
        parts = None
        if use_net and forced is None:
            parts = (pol.split_theta(th) if family.is_paper
                     else conv_policy.split_thetas(th, family))
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
                c, p = self._rollout_chunk(seeds[i : i + ec], kj, sub_parts, net_scale, f,
                                           family)
                chk[i : i + ec, j : j + pc] = c
                pr[i : i + ec, j : j + pc] = p
        return RolloutResult(cost_from_checks(chk), chk, pr)

    def _rollout_chunk(self, seeds: np.ndarray, k: int, parts: dict[str, torch.Tensor] | None,
                       net_scale: float, forced: np.ndarray | None,
                       family: PolicyFamily = PAPER_FAMILY) -> tuple[np.ndarray, np.ndarray]:
        """One chunk stepped through `dynamics`: (first colliding checks, primitives flown)."""
        dev, n = self.device, len(seeds)
        st = self._chunk_scenes(seeds)
        state = dyn.initial(torch.zeros(n, k, dtype=torch.long, device=dev))
        chosen = torch.full((n, k, spec.N_STEPS), -1, dtype=torch.long, device=dev)
        env_grid = torch.arange(n, device=dev)[:, None].expand(n, k)
        forced_t = None if forced is None else torch.as_tensor(forced, device=dev)
        while not bool(dyn.terminal(state).all()):
            step, alive = state.step, state.alive
            live = (env_grid[alive], state.ix[alive], state.iz[alive])
            if forced_t is not None:
                prim = forced_t[..., step][alive]
            else:
                prim = self._choose(st, step, live, alive, parts, net_scale, family)
            chosen[..., step][alive] = prim
            first = torch.zeros_like(state.checks)
            first[alive] = self._sweep_states(st, step, live, prim)
            state = dyn.transition(state, chosen[..., step], first)
        return state.checks.cpu().numpy(), chosen.cpu().numpy()

    def _chunk_scenes(self, seeds: np.ndarray) -> SceneTensors:
        scenes = [sample_scene(int(s), **self.scene_options) for s in seeds]
        if not self.compile:
            return self.scene_tensors(scenes)
        scenes += [scenes[0]] * (self.env_chunk - len(scenes))  # one static table shape
        # the tables made with the rays by column band: the same values as reordering them
        st = SceneTensors(scenes, self.rays[self.band_pixels], self.dtype)
        e, k = st.da.shape[:2]
        st.banded = tuple(t.reshape(e, k, self.bands, -1) for t in (st.da, st.a2))
        return st

    def _choose(self, st: SceneTensors, step: int, live: _Live, alive: torch.Tensor,
                parts: dict[str, torch.Tensor] | None, net_scale: float,
                family: PolicyFamily = PAPER_FAMILY) -> torch.Tensor:
        """The primitive each living rollout flies, rendering each distinct state once."""
        ukey, inv = torch.unique(_state_key(*live), return_inverse=True)
        ue, ux, uz = _key_state(ukey)
        images, xp = self._render(st, ue, self.positions(step, ux, uz))
        scores = self.cells.scores(images)[inv]
        if parts is not None:
            net = (self._net(images, xp, inv, alive, parts) if family.is_paper
                   else conv_policy.conv_scores(images, inv, alive.nonzero()[:, 1], parts))
            scores = scores + net_scale * net
        return pol.choose(scores)

    def _sweep_states(self, st: SceneTensors, step: int, live: _Live, prim: torch.Tensor
                      ) -> torch.Tensor:
        """First colliding check of each living rollout's primitive, each distinct
        (environment, state, primitive) swept once."""
        ukey, inv = torch.unique(_state_key(*live) * 32 + prim, return_inverse=True)
        ue, ux, uz = _key_state(ukey // 32)
        pos, disp = self.positions(step, ux, uz), self.check_disp[ukey % 32]
        touch = cull.touchable(pos + disp.amin(1), pos + disp.amax(1), st.centres[ue],
                               st.axes[ue], st.radii[ue])
        pairs = touch.nonzero(as_tuple=True)
        return raycast.sweep_kernel(st, ue, pos, disp, pairs)[inv]

    def _net(self, images: torch.Tensor, xp: torch.Tensor | None, inv: torch.Tensor,
             alive: torch.Tensor, parts: dict[str, torch.Tensor]) -> torch.Tensor:
        """Net scores (R, 25) for the alive (env, policy) pairs, in alive order.

        The conv layers run per alive pair in fixed-size chunks (one static shape for the
        compiled kernels, which read the polyphase inputs xp; eager: `policy.conv_features`);
        the linear layers run on a dense (rows, k) grid so each policy's 13k fc weights are
        used in place rather than copied per pair.
        """
        k = alive.shape[1]
        env_idx, pol_idx = alive.nonzero(as_tuple=True)
        n_alive = env_idx.shape[0]
        feats = torch.empty(n_alive, 529, dtype=images.dtype, device=images.device)
        nc = self.net_chunk
        if xp is not None:
            torch._dynamo.mark_dynamic(xp, 0)  # one conv1 kernel for any number of frames
        for i in range(0, n_alive, nc):
            g, pi = inv[i : i + nc], pol_idx[i : i + nc]
            m = g.shape[0]
            if xp is not None and m < nc:
                g = torch.cat([g, g[:1].expand(nc - m)])
                pi = torch.cat([pi, pi[:1].expand(nc - m)])
            w1, b1, w2, b2 = pol.conv_weights(parts, pi)
            if xp is None:
                feats[i : i + m] = pol.conv_features(images[g], w1, b1, w2, b2)
                continue
            out = self._compiled_or_eager("conv", fast.conv_at, "net", xp, g, w1, b1, w2, b2)
            feats[i : i + m] = out[:m]
        has = alive.any(1)
        row_of = torch.cumsum(has.long(), 0) - 1
        grid = torch.zeros(int(has.sum()), k, 529, dtype=images.dtype, device=images.device)
        grid[row_of[env_idx], pol_idx] = feats
        return pol.head(grid, parts)[row_of[env_idx], pol_idx]


def _compile(fn: Any) -> Any:
    """torch.compile for one static shape (every call is padded to it)."""
    return torch.compile(fn, dynamic=False)


@contextlib.contextmanager
def torch_threads_scope(n: int) -> Iterator[None]:
    """Run with n torch CPU threads (0: unchanged), restoring the previous setting."""
    before = torch.get_num_threads()
    if n > 0 and n != before:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n > 0 and n != before:
            torch.set_num_threads(before)


class BatchedScene:
    """The batched kernels on one scene behind `scene_sim.SceneSimulator` (tables built once per
    `load`; eager on CPU by default, as the Gym env, figures and cross-validation use it)."""

    def __init__(self, sim: BatchedSimulator | None = None) -> None:
        self.sim = sim if sim is not None else BatchedSimulator()
        self.scene: Scene | None = None
        self._tables: SceneTensors | None = None

    def load(self, scene: Scene) -> None:
        self.scene, self._tables = scene, self.sim.scene_tensors([scene])

    def render(self, position: np.ndarray) -> np.ndarray:
        """z-depth (50, 50) float32 at `position` (3,); positions (F, 3) give (F, 50, 50)."""
        pos = np.asarray(position, dtype=np.float64)
        flat = torch.as_tensor(pos.reshape(-1, 3), device=self.sim.device)
        env = torch.zeros(flat.shape[0], dtype=torch.long, device=self.sim.device)
        images = self.sim.render(self._loaded(), env, flat).cpu().numpy()
        return images.reshape(*pos.shape[:-1], spec.IMG, spec.IMG)

    def sweep(self, position: np.ndarray, prim: int) -> int:
        dev = self.sim.device
        pos = torch.as_tensor(np.asarray(position, dtype=np.float64).reshape(1, 3), device=dev)
        env = torch.zeros(1, dtype=torch.long, device=dev)
        return int(self.sim.sweep(self._loaded(), env, pos, torch.tensor([prim], device=dev))[0])

    def close(self) -> None:
        self.scene = self._tables = None

    def _loaded(self) -> SceneTensors:
        if self._tables is None:
            raise RuntimeError("load a scene before rendering or sweeping")
        return self._tables
