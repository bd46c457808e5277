"""A privileged UAV teacher: the exact dynamic program over the primitive lattice, and the
clearance-greedy planner.

The robot only ever stands on lattice states (step, ix, iz) (`dynamics.GridState`), so with the
scene known the whole decision problem is finite: sweep every primitive from every state of the
lattice once, then solve the cost-to-go backwards. Every state then has a label for free (what
DAgger-style relabelling needs), not only the states on the optimal path.

Sweeps use the batched simulator's own kernel (`raycast.sweep_kernel`, float64) on culled
cylinder tables: a cylinder is dropped for a step only when the capsule around its axis cannot
come within reach of any check point of that step, so first-collision checks are bit-identical
to the simulator's (tests/worlds/uav/test_teacher.py compares them, and replays plans in both
simulators). Clearance (distance to the nearest surface minus the robot's radius) is computed
beside it and capped at `clear_cap`; it is what breaks ties between collision-free plans.

Values, lexicographic per (state, primitive): the rollout cost if the robot flies this primitive
and then the best plan (0 when a collision-free path to the horizon exists), then the smallest
clearance along that plan (the larger, the safer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from pacplan.errors import PacplanError
from pacplan.validation import check_teacher_seeds
from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import primitives as prims
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.scene import Scene, sample_scene

IX_MAX = 9  # |x| = 0.5·ix < WALL_X − ROBOT_RADIUS: a living robot stands at |ix| ≤ 9
IZ_MAX = 3  # FLOOR + r < 2 + 0.5·iz < CEIL − r: |iz| ≤ 3
NX = 2 * IX_MAX + 1
NZ = 2 * IZ_MAX + 1
NP = spec.N_PRIMS
T = spec.N_STEPS
SUPPORTED_WORLDS = ("uav",)
DEFAULT_CLEAR_CAP = 1.0
_FAR = 1e6  # where padding cylinders stand (never near anything)


def check_teacher_request(world: str, seeds: Sequence[int],
                          forbidden: dict[str, Sequence[int] | None] | None = None) -> None:
    """Refuse, in one line and before any work, a world the teacher cannot plan in or teacher
    seeds that overlap certification or test seeds (labels there would void the bound)."""
    if world not in SUPPORTED_WORLDS:
        raise PacplanError(f"the privileged teacher plans only in the {', '.join(SUPPORTED_WORLDS)}"
                           f" world, not {world!r}")
    check_teacher_seeds(seeds, forbidden or {}, "prior-training")


@dataclass(frozen=True)
class Lattice:
    """The solved lattice of a batch of environments.

    first (E, T, NX, NZ, 25) int8: first colliding check (1..20, 0 = none) of each primitive
    from each state; clear (same shape) float32: its clearance (capped); q_cost / q_clear:
    the lexicographic values of flying the primitive then the best plan; cost / clear_to_go
    (E, T + 1, NX, NZ): the values of the states. States no primitive sequence can reach
    (|ix| > 2·step etc.) hold first = 20 (treated as colliding) and are never asked for.
    """

    seeds: np.ndarray
    first: np.ndarray
    clear: np.ndarray
    q_cost: np.ndarray
    q_clear: np.ndarray
    cost: np.ndarray
    clear_to_go: np.ndarray
    clear_cap: float

    def q(self, env: np.ndarray, step: np.ndarray, ix: np.ndarray, iz: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray]:
        """(q_cost, q_clear) (Q, 25) of lattice states; env indexes this batch."""
        self._check_states(step, ix, iz)
        i, k = np.asarray(ix) + IX_MAX, np.asarray(iz) + IZ_MAX
        return self.q_cost[env, step, i, k], self.q_clear[env, step, i, k]

    def best(self, env: np.ndarray, step: np.ndarray, ix: np.ndarray, iz: np.ndarray
             ) -> np.ndarray:
        """The teacher's primitive (Q,) at lattice states: lowest cost, then most clearance,
        then the straighter primitive (the policy's own tie-break order)."""
        qc, ql = self.q(env, step, ix, iz)
        return best_primitive(qc, ql)

    def plan(self) -> np.ndarray:
        """(E, 12) the optimal primitive sequence from the start in every environment."""
        return self._follow(lambda e, s, ix, iz: self.best(e, s, ix, iz))

    def greedy(self) -> np.ndarray:
        """(E, 12) the clearance-greedy plan: among primitives that do not collide now, the one
        with the most clearance (none free: the one that collides latest)."""

        def pick(e: np.ndarray, s: int, ix: np.ndarray, iz: np.ndarray) -> np.ndarray:
            i, k = ix + IX_MAX, iz + IZ_MAX
            f = self.first[e, s, i, k].astype(np.float64)
            later = np.where(f == 0, 0.0, 1.0 - (s * spec.CHECKS_PER_PRIM + f) / (T * 20))
            return best_primitive(later, self.clear[e, s, i, k])

        return self._follow(pick)

    def _follow(self, pick: object) -> np.ndarray:
        e = np.arange(len(self.seeds))
        ix = np.zeros_like(e)
        iz = np.zeros_like(e)
        alive = np.ones(len(e), bool)
        out = np.full((len(e), T), -1, np.int64)
        for s in range(T):
            if not alive.any():
                break
            a = np.flatnonzero(alive)
            p = pick(e[a], s, ix[a], iz[a])  # type: ignore[operator]
            out[a, s] = p
            hit = self.first[a, s, ix[a] + IX_MAX, iz[a] + IZ_MAX, p] > 0
            dix, diz = prims.grid_step(p)
            ix[a] += dix
            iz[a] += diz
            alive[a[hit]] = False
        return out

    def _check_states(self, step: np.ndarray, ix: np.ndarray, iz: np.ndarray) -> None:
        step, ix, iz = (np.asarray(v) for v in (step, ix, iz))
        bad = (step < 0) | (step >= T) | (np.abs(ix) > IX_MAX) | (np.abs(iz) > IZ_MAX)
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            raise PacplanError(f"state (step {int(step.flat[j])}, ix {int(ix.flat[j])}, iz "
                               f"{int(iz.flat[j])}) is not a living lattice state")


def best_primitive(q_cost: np.ndarray, q_clear: np.ndarray) -> np.ndarray:
    """Index of the lexicographic best (lowest cost, most clearance, straighter) along axis -1."""
    order = spec.tie_break_order()
    qc, ql = q_cost[..., order], q_clear[..., order]
    low = qc <= qc.min(-1, keepdims=True)
    score = np.where(low, ql, -np.inf)
    return order[np.argmax(score, axis=-1)]


def _step_points_box(step: int) -> tuple[float, float]:
    """y-range of every check point of primitives flown at `step`."""
    y0 = dyn.FORWARD_PER_STEP * step
    return y0 + float(dyn.CHECK_DISP[..., 1].min()), y0 + float(dyn.CHECK_DISP[..., 1].max())


def _relevant(scenes: Sequence[Scene], step: int, reach: float) -> list[np.ndarray]:
    """Per scene, the cylinders that may come within `reach` of a check point of `step`.

    Conservative: the solid cylinder lies in the capsule of radius r around its axis segment, and
    only check points inside the living box (|x| < WALL − r, FLOOR + r < z < CEIL − r) can matter
    (outside it the check collides with a wall, floor or ceiling anyway); the segment's part whose
    z can come within r + reach of that box is bounded, then its x/y extent is tested.
    """
    y0, y1 = _step_points_box(step)
    zlo, zhi = spec.FLOOR_Z + spec.ROBOT_RADIUS, spec.CEIL_Z - spec.ROBOT_RADIUS
    xhi = spec.WALL_X - spec.ROBOT_RADIUS
    out = []
    for sc in scenes:
        pad = sc.radii + reach
        c, a = sc.centres, sc.axes
        h = spec.OBST_HALF
        # axial parameter range where the axis's z lies within [zlo - pad, zhi + pad]
        az = a[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            ta = (zlo - pad - c[:, 2]) / az
            tb = (zhi + pad - c[:, 2]) / az
        lo = np.where(az != 0, np.minimum(ta, tb), -h)
        hi = np.where(az != 0, np.maximum(ta, tb), h)
        inside_z = (az != 0) | ((c[:, 2] >= zlo - pad) & (c[:, 2] <= zhi + pad))
        lo, hi = np.maximum(lo, -h), np.minimum(hi, h)
        keep = inside_z & (lo <= hi)
        ends = c[:, None, :] + np.stack([lo, hi], 1)[:, :, None] * a[:, None, :]  # (K, 2, 3)
        ylo, yhi = ends[..., 1].min(1) - pad, ends[..., 1].max(1) + pad
        xlo, xhi_ = ends[..., 0].min(1) - pad, ends[..., 0].max(1) + pad
        keep &= (yhi >= y0) & (ylo <= y1) & (xhi_ >= -xhi) & (xlo <= xhi)
        out.append(np.flatnonzero(keep))
    return out


def _cells(step: int) -> tuple[np.ndarray, np.ndarray]:
    """Lattice cells (ix, iz) reachable at `step` by some primitive sequence, inside the box."""
    rx, rz = min(2 * step, IX_MAX), min(2 * step, IZ_MAX)
    ix, iz = np.meshgrid(np.arange(-rx, rx + 1), np.arange(-rz, rz + 1), indexing="ij")
    return ix.ravel(), iz.ravel()


def _step_sweeps(scene: Scene, keep: np.ndarray, step: int, clear_cap: float,
                 cells: tuple[np.ndarray, np.ndarray] | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(first colliding check, clearance) (C, 25) of every primitive from every cell of `step`
    (cells: the product of the given ix and iz values, ix-major; default every cell `_cells`
    lists), against the cylinders `keep` and the tunnel.

    The collision test is `raycast.sweep_kernel`'s, op for op in float64 (the test suite checks
    equality to the bit), laid out on the structure of the lattice: at check k every point is
    (X, y_k, Z) with X = x(ix) + dx·s_k and Z = z(iz) + dz·s_k, so the per-axis terms of the
    kernel's sums (w_x·a_x + w_y·a_y, w_x² + w_y²) are computed once per X and the z terms once
    per Z, and the grid of all (cell, primitive) pairs is their outer sum. Clearance = min over
    checks of the distance to the nearest surface minus the robot radius, capped at clear_cap.
    """
    r = spec.ROBOT_RADIUS
    if cells is None:
        rx, rz = min(2 * step, IX_MAX), min(2 * step, IZ_MAX)
        cells = (np.arange(-rx, rx + 1), np.arange(-rz, rz + 1))
    x0, y0, z0 = dyn.grid_coords(step, np.asarray(cells[0], dtype=np.float64),
                                 np.asarray(cells[1], dtype=np.float64))
    d = dyn.CHECK_DISP  # (25, 20, 3); x offset depends on p // 5, z offset on p % 5
    xs = torch.as_tensor(x0[:, None, None] + d[None, ::5, :, 0])  # (NXc, 5, 20)
    zs = torch.as_tensor(z0[:, None, None] + d[None, :5, :, 2])  # (NZc, 5, 20)
    xs = xs.permute(2, 0, 1).reshape(spec.CHECKS_PER_PRIM, -1)  # (20, X)
    zs = zs.permute(2, 0, 1).reshape(spec.CHECKS_PER_PRIM, -1)  # (20, Z)
    ys = torch.as_tensor(y0 + d[0, :, 1])  # (20,)
    hit = (xs.abs() >= spec.WALL_X - r)[:, :, None] | (
        (zs <= spec.FLOOR_Z + r) | (zs >= spec.CEIL_Z - r))[:, None, :]
    planes = torch.minimum((spec.WALL_X - xs.abs())[:, :, None],
                           torch.minimum(zs - spec.FLOOR_Z, spec.CEIL_Z - zs)[:, None, :])
    dist = planes
    d2min = None
    for j in keep:  # one cylinder at a time: its (20, X, Z) temporaries stay in cache
        c, a, rad = (torch.as_tensor(v) for v in (scene.centres[j], scene.axes[j],
                                                  scene.radii[j]))
        wx = xs - c[0]  # (20, X)
        wy = ys - c[1]  # (20,)
        wz = zs - c[2]  # (20, Z)
        sxy = wx * a[0] + (wy * a[1])[:, None]
        s = sxy[..., None] + (wz * a[2])[:, None, :]  # (20, X, Z)
        ww = (wx * wx + (wy * wy)[:, None])[..., None] + (wz * wz)[:, None, :]
        rho = (ww - s * s).clamp_min_(0).sqrt_()
        dr = (rho - rad).clamp_min_(0)
        ds = s.abs_().sub_(spec.OBST_HALF).clamp_min_(0)
        d2 = dr.mul_(dr).add_(ds.mul_(ds))
        hit |= d2 <= r**2
        d2min = d2 if d2min is None else torch.minimum(d2min, d2, out=d2min)
    if d2min is not None:
        dist = torch.minimum(d2min.sqrt_(), planes)
    first = torch.where(hit.any(0), hit.to(torch.int8).argmax(0) + 1, 0)  # (X, Z)
    clear = (dist.amin(0) - r).clamp(max=clear_cap)
    shape = (len(cells[0]), 5, len(cells[1]), 5)  # (ix, dx, iz, dz) -> (ix, iz, 5·dx + dz)
    return tuple(v.reshape(shape).permute(0, 2, 1, 3).reshape(-1, NP).numpy()
                 for v in (first, clear))  # type: ignore[return-value]


def solve(seeds: Sequence[int], clear_cap: float = DEFAULT_CLEAR_CAP,
          scenes: Sequence[Scene] | None = None) -> Lattice:
    """Sweep the lattice of each environment and solve its dynamic program (CPU, float64)."""
    seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
    if scenes is None:
        scenes = [sample_scene(int(s)) for s in seeds]
    e_n = len(scenes)
    first = np.full((e_n, T, NX, NZ, NP), spec.CHECKS_PER_PRIM, np.int8)
    clear = np.full((e_n, T, NX, NZ, NP), -1.0, np.float32)
    reach = spec.ROBOT_RADIUS + clear_cap
    for s in range(T):
        ix, iz = _cells(s)
        keep = _relevant(scenes, s, reach)
        for e in range(e_n):
            f, c = _step_sweeps(scenes[e], keep[e], s, clear_cap)
            first[e, s, ix + IX_MAX, iz + IZ_MAX] = f
            clear[e, s, ix + IX_MAX, iz + IZ_MAX] = c
    return _backward(seeds, first, clear, clear_cap)


def plans(seeds: Sequence[int], clear_cap: float = DEFAULT_CLEAR_CAP) -> np.ndarray:
    """An optimal primitive sequence (n, 12) of each environment, found fast and exactly.

    A depth-first search from the start, most clearance first, with dead states remembered,
    looks for a collision-free path (cost 0, the optimum); it is complete, so when it finds
    none the environment is solved in full (`solve`, then its plan). The search usually sweeps
    a few hundred (state, primitive) pairs instead of the ~30,000 of the whole lattice; the
    plans' costs equal `solve(seeds).cost` at the start (tested).
    """
    seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
    out = np.full((len(seeds), T), -1, np.int64)
    for i, seed in enumerate(seeds):
        scene = sample_scene(int(seed))
        path = _free_path(scene, clear_cap)
        out[i] = path if path is not None else solve([int(seed)], clear_cap, [scene]).plan()[0]
    return out


def _free_path(scene: Scene, clear_cap: float) -> list[int] | None:
    """A collision-free primitive sequence of 12 from the start, or None when none exists."""
    reach = spec.ROBOT_RADIUS + clear_cap
    keep = [_relevant([scene], s, reach)[0] for s in range(T)]
    dead: set[tuple[int, int, int]] = set()
    path: list[int] = []

    def search(step: int, ix: int, iz: int) -> bool:
        if step == T:
            return True
        if (step, ix, iz) in dead:
            return False
        f, c = _step_sweeps(scene, keep[step], step, clear_cap,
                            (np.array([ix]), np.array([iz])))
        free = np.flatnonzero(f[0] == 0)
        for p in free[np.argsort(-c[0, free], kind="stable")]:
            path.append(int(p))
            if search(step + 1, ix + int(p) // 5 - 2, iz + int(p) % 5 - 2):
                return True
            path.pop()
        dead.add((step, ix, iz))
        return False

    return path if search(0, 0, 0) else None


def _backward(seeds: np.ndarray, first: np.ndarray, clear: np.ndarray, clear_cap: float
              ) -> Lattice:
    """The dynamic program: values of every (state, primitive) from the horizon back."""
    e_n = len(seeds)
    cost = np.zeros((e_n, T + 1, NX, NZ))
    ctg = np.full((e_n, T + 1, NX, NZ), clear_cap, np.float64)
    q_cost = np.empty(first.shape, np.float64)
    q_clear = np.empty(first.shape, np.float64)
    dix, diz = prims.grid_step(np.arange(NP))
    ii, kk = np.meshgrid(np.arange(NX), np.arange(NZ), indexing="ij")
    ni = ii[..., None] + dix  # (NX, NZ, 25) successor cell
    nk = kk[..., None] + diz
    inside = (ni >= 0) & (ni < NX) & (nk >= 0) & (nk < NZ)
    ni, nk = np.clip(ni, 0, NX - 1), np.clip(nk, 0, NZ - 1)
    horizon = T * spec.CHECKS_PER_PRIM
    for s in range(T - 1, -1, -1):
        f = first[:, s].astype(np.float64)
        hit = (f > 0) | ~inside  # leaving the box always collides (first > 0 there anyway)
        nxt_cost = cost[:, s + 1][:, ni, nk]
        nxt_clear = ctg[:, s + 1][:, ni, nk]
        qc = np.where(hit, 1.0 - (s * spec.CHECKS_PER_PRIM + f) / horizon, nxt_cost)
        ql = np.where(hit, clear[:, s], np.minimum(clear[:, s], nxt_clear))
        q_cost[:, s], q_clear[:, s] = qc, ql
        b = best_primitive(qc, ql)
        cost[:, s] = np.take_along_axis(qc, b[..., None], -1)[..., 0]
        ctg[:, s] = np.take_along_axis(ql, b[..., None], -1)[..., 0]
    return Lattice(seeds, first, clear, q_cost, q_clear, cost, ctg, clear_cap)
