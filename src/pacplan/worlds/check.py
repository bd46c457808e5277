"""`check_world`: does a world keep the promises a certificate rests on? (like Gymnasium's
`check_env`).

A PAC-Bayes bound is only as sound as the costs behind it: they must lie in [0, 1], be the same
every time they are computed (a resumed run, another executor or a verifier recomputes them), not
depend on which other (seed, policy) pairs share a call (executors chunk the work), and seeds
must name different environments (else N environments are one). Worker processes rebuild the
world from a pickle or from its (name, options) spec. Each promise is one named check, tried on
a few seeds and small random policies, so a user's new world fails here, not inside a run.
"""

from __future__ import annotations

import math
import pickle
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacplan.errors import CostRangeError, PacplanError
from pacplan.validation import check_int, check_policies, check_seeds, count
from pacplan.worlds.base import World, make_world
from pacplan.worlds.check_report import (
    DEFAULT_SEEDS,
    FAILED,
    LAST_BITS,
    PASSED,
    SKIPPED,
    WARNING,
    CheckReport,
    CheckResult,
    default_policies,
)

DEFAULT_CALL_TIMEOUT_S = 600.0
"""check_world's limit on one call into a world (seconds): far above a sane check's calls."""


class _Failed(Exception):
    """Raised inside a check to fail it with a one-line reason."""


@dataclass
class _Context:
    """What the checks share: the world, its inputs and the first cost matrix."""

    world: Any
    name: str | None
    options: dict[str, Any]
    seeds: np.ndarray
    thetas_in: np.ndarray | None
    n_policies: int
    thetas: np.ndarray = field(default_factory=lambda: np.empty((0, 0), np.float32))
    costs: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    first_s: float = 0.0
    warm_s: float = 0.0
    dim: int | None = None
    probe: np.ndarray | None = None
    timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S
    hung: bool = False
    range_error: str | None = None

    def call(self, thetas: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, float]:
        """The world's costs as an array, and the seconds the call took."""
        start = time.perf_counter()
        out = np.asarray(self.limited("costs", self.world.costs, thetas, seeds))
        return out, time.perf_counter() - start

    def limited(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` (a call into the world) under the per-call time limit: a call that does
        not return in time fails its check (the world is reported as failing, never waited on
        forever); whatever it raises, SystemExit included, is raised here."""
        if self.timeout_s is None:
            return fn(*args)
        box: dict[str, Any] = {}

        def target() -> None:
            try:
                box["out"] = fn(*args)
            except BaseException as exc:  # SystemExit too: re-raised in the caller
                box["exc"] = exc

        worker = threading.Thread(target=target, name=f"check_world {what}", daemon=True)
        worker.start()
        worker.join(self.timeout_s)
        if worker.is_alive():
            self.hung = True
            raise _Failed(f"{what}() did not return within {self.timeout_s:g} s (check_world's "
                          "per-call time limit); the world hangs or is far too slow")
        if "exc" in box:
            raise box["exc"]
        return box["out"]


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(ctx: _Context, mask: np.ndarray) -> tuple[int, int, int]:
    """(count, seed, policy index) of the first True entry of a (n, k) mask."""
    i, j = np.argwhere(mask)[0]
    return int(mask.sum()), int(ctx.seeds[i]), int(j)


def _check_interface(ctx: _Context) -> str:
    """The protocol's attributes: a str `name`, callable `policy_dim` and `costs`."""
    if not isinstance(ctx.world, World):
        missing = [a for a in ("name", "policy_dim", "costs") if not hasattr(ctx.world, a)]
        raise _Failed(f"{type(ctx.world).__name__} lacks {', '.join(missing)} (see World)")
    if not isinstance(ctx.world.name, str) or not ctx.world.name:
        raise _Failed(f"name must be a non-empty str, got {ctx.world.name!r}")
    return f"name {ctx.world.name!r}"


def _check_policy_dim(ctx: _Context) -> str:
    d = ctx.limited("policy_dim", ctx.world.policy_dim)
    if isinstance(d, bool | np.bool_) or not isinstance(d, int | np.integer) or d < 1:
        raise _Failed(f"policy_dim() must be a positive int, got {d!r} ({type(d).__name__})")
    ctx.dim = int(d)
    ctx.thetas = (default_policies(ctx.dim, ctx.n_policies) if ctx.thetas_in is None
                  else check_policies(ctx.thetas_in, ctx.dim, "thetas"))
    return f"d = {ctx.dim}"


def _check_shape(ctx: _Context) -> str | tuple[str, str]:
    """(n, k) floats for (k, d) float32 policies and (n,) int64 seeds."""
    try:
        out, ctx.first_s = ctx.call(ctx.thetas, ctx.seeds)
    except CostRangeError as exc:  # not a shape problem: in_declared_range reports it
        ctx.range_error = str(exc)
        return SKIPPED, "no costs: an outcome is outside the world's declared range"
    want = (ctx.seeds.size, ctx.thetas.shape[0])
    if out.shape != want:
        raise _Failed(f"costs of {count(want[1], 'policy')} on {count(want[0], 'seed')} have "
                      f"shape {out.shape}, "
                      f"expected (n, k) = {want}")
    if out.dtype.kind != "f":
        raise _Failed(f"costs have dtype {out.dtype}, expected a float dtype (float64)")
    ctx.costs = out
    return f"{out.shape} {out.dtype}"


def _check_declared_range(ctx: _Context) -> str | tuple[str, str]:
    """No raw outcome outside the range the world's options declare (a Gymnasium env's return
    outside `return_bounds`: its cost would leave [0, 1]); the world raises CostRangeError."""
    if ctx.range_error is not None:
        raise _Failed(ctx.range_error)
    if ctx.costs.size == 0:
        return SKIPPED, "needs the costs of shape_dtype"
    return "no outcome outside a range the world declares"


def _check_finite(ctx: _Context) -> str:
    bad = ~np.isfinite(ctx.costs)
    if bad.any():
        count, seed, j = _where(ctx, bad)
        value = float(ctx.costs[np.argwhere(bad)[0][0], j])
        raise _Failed(f"seed {seed}, policy {j}: cost {value!r} ({count} of {bad.size} costs "
                      "are NaN or infinite)")
    return f"all {ctx.costs.size} costs finite"


def _check_unit_interval(ctx: _Context) -> str:
    with np.errstate(invalid="ignore"):
        bad = (ctx.costs < 0.0) | (ctx.costs > 1.0)
    if bad.any():
        count, seed, j = _where(ctx, bad)
        value = float(ctx.costs[np.argwhere(bad)[0][0], j])
        raise _Failed(f"seed {seed}, policy {j}: cost {value!r} outside [0, 1] ({count} of "
                      f"{bad.size}); a bound on clipped costs is void, so fix the world")
    return f"min {np.nanmin(ctx.costs):.4g}, max {np.nanmax(ctx.costs):.4g}"


def _first_difference(ctx: _Context, a: np.ndarray, b: np.ndarray, seeds: np.ndarray) -> str:
    i, j = np.argwhere(~((a == b) | (np.isnan(a) & np.isnan(b))))[0]
    return f"seed {int(seeds[i])}, policy {int(j)}: {float(a[i, j])!r} vs {float(b[i, j])!r}"


def _check_deterministic(ctx: _Context) -> str:
    """The same inputs, called again, give bit-identical costs."""
    again, ctx.warm_s = ctx.call(ctx.thetas, ctx.seeds)
    if again.shape != ctx.costs.shape:
        raise _Failed(f"a second call returned shape {again.shape}, the first {ctx.costs.shape}")
    if not np.array_equal(again, ctx.costs, equal_nan=True):
        raise _Failed("a second call with the same inputs differs at "
                      + _first_difference(ctx, ctx.costs, again, ctx.seeds))
    return "a second call gives identical costs"


def _largest_difference(a: np.ndarray, b: np.ndarray) -> float:
    """max |a − b| over entries that differ (NaN against a number counts as infinite)."""
    differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    gaps = np.abs(a[differ] - b[differ])
    return float(np.max(np.nan_to_num(gaps, nan=math.inf))) if gaps.size else 0.0


def _check_batch_independent(ctx: _Context) -> str | tuple[str, str]:
    """A (seed, policy) pair's cost does not depend on the other pairs in the call or their order
    (executors split the work into chunks): reversed halves, and the last pair alone."""
    n, k = ctx.costs.shape
    rows = np.arange(n)[::-1][: max(1, n // 2)]
    cols = np.arange(k)[::-1]
    cases = [(rows, cols), (rows[:1], cols[:1])]
    worst = 0.0
    for r, c in cases:
        got, _ = ctx.call(ctx.thetas[c], ctx.seeds[r])
        want = ctx.costs[np.ix_(r, c)]
        if got.shape != want.shape:
            raise _Failed(f"{count(len(c), 'policy')} on {count(len(r), 'seed')} gave shape "
                          f"{got.shape}")
        if not np.array_equal(got, want, equal_nan=True):
            diff = _largest_difference(got, want)
            if not diff <= LAST_BITS:
                raise _Failed("another batch (reordered, or one pair alone) differs at "
                              + _first_difference(ctx, want, got, ctx.seeds[r]))
            worst = max(worst, diff)
    if worst:
        return WARNING, (f"another batch changes the last bits (max |Δ| = {worst:.2g}); keep "
                         "executor chunk sizes fixed within a run")
    return "reordered and single-pair calls give identical costs"


def _check_seeds_differ(ctx: _Context) -> str:
    """Seeds name different environments: not every seed gives the same cost row."""
    n, k = ctx.costs.shape
    if n < 2:
        return SKIPPED, "needs at least 2 seeds"
    same = [np.array_equal(ctx.costs[0], row, equal_nan=True) for row in ctx.costs[1:]]
    if all(same):
        raise _Failed(f"all {n} seeds give the same costs for each of {count(k, 'policy')}: "
                      "the seed does not change the environment (or every cost is saturated)")
    distinct = len({row.tobytes() for row in ctx.costs})
    return f"{distinct} distinct cost rows over {n} seeds"


def _check_policies_differ(ctx: _Context) -> str | tuple[str, str]:
    """Policies matter: a world ignoring its weights certifies nothing about them (a warning,
    since small policies may all fail the same way)."""
    k = ctx.costs.shape[1]
    if k < 2:
        return SKIPPED, "needs at least 2 policies"
    if all(np.array_equal(ctx.costs[:, 0], ctx.costs[:, j], equal_nan=True) for j in range(1, k)):
        return WARNING, (f"all {k} policies give equal costs on every seed: are the weights "
                         "used? (or try larger policies)")
    return f"{len({col.tobytes() for col in ctx.costs.T})} distinct cost columns over {k} policies"


def _first_seed_costs(ctx: _Context) -> np.ndarray:
    """The original world's costs on the first seed alone (computed once): copies are compared on
    the same call, so a batching world's last bits cannot differ by batch."""
    if ctx.probe is None:
        ctx.probe, _ = ctx.call(ctx.thetas, ctx.seeds[:1])
    return ctx.probe


def _same_costs(ctx: _Context, world: Any, how: str) -> None:
    """A copy of the world gives the first seed's costs bit for bit."""
    want = _first_seed_costs(ctx)
    got = np.asarray(ctx.limited("costs", world.costs, ctx.thetas, ctx.seeds[:1]))
    if got.shape != want.shape or not np.array_equal(got, want, equal_nan=True):
        detail = (_first_difference(ctx, want, got, ctx.seeds[:1])
                  if got.shape == want.shape else f"shape {got.shape}")
        raise _Failed(f"the world {how} gives other costs: {detail}")


def _check_picklable(ctx: _Context) -> str:
    """Worker processes receive the world by pickle."""
    try:
        blob = ctx.limited("pickle.dumps", pickle.dumps, ctx.world)
        copy = ctx.limited("pickle.loads", pickle.loads, blob)
    except _Failed:
        raise
    except Exception as exc:
        raise _Failed(f"pickle round trip raised {type(exc).__name__}: {exc}") from None
    _same_costs(ctx, copy, "after a pickle round trip")
    return f"{len(blob)} bytes; the copy gives identical costs"


def _check_rebuild(ctx: _Context) -> str:
    """Worker processes and resumed runs rebuild the world from its (name, options) spec."""
    if ctx.name is None:
        return SKIPPED, "given as an object: no (name, options) spec to rebuild from"
    rebuilt = ctx.limited("make_world", lambda: make_world(ctx.name, **ctx.options))
    _same_costs(ctx, rebuilt, "rebuilt by make_world")
    return f"make_world({ctx.name!r}, **options) gives identical costs"


def _check_timing(ctx: _Context) -> str:
    pairs = ctx.costs.size
    return (f"{ctx.warm_s / pairs:.3g} s per rollout ({pairs} in {ctx.warm_s:.3g} s; first call "
            f"{ctx.first_s:.3g} s, with any warm-up)")


_Check = Callable[[_Context], str | tuple[str, str]]
CHECKS: tuple[tuple[str, _Check, tuple[str, ...]], ...] = (
    ("interface", _check_interface, ()),
    ("policy_dim", _check_policy_dim, ("interface",)),
    ("shape_dtype", _check_shape, ("policy_dim",)),
    ("in_declared_range", _check_declared_range, ("policy_dim",)),
    ("finite", _check_finite, ("shape_dtype",)),
    ("in_unit_interval", _check_unit_interval, ("shape_dtype",)),
    ("deterministic", _check_deterministic, ("shape_dtype",)),
    ("batch_independent", _check_batch_independent, ("deterministic",)),
    ("seeds_differ", _check_seeds_differ, ("shape_dtype",)),
    ("policies_differ", _check_policies_differ, ("shape_dtype",)),
    ("picklable", _check_picklable, ("shape_dtype",)),
    ("rebuild_from_spec", _check_rebuild, ("shape_dtype",)),
    ("timing", _check_timing, ("deterministic",)),
)
"""(name, check, the checks it needs to have passed or warned), in the order they run."""


def _run_check(name: str, check: _Check, ctx: _Context) -> CheckResult:
    """One check; any exception the world raises fails it with a one-line reason."""
    try:
        out = check(ctx)
    except _Failed as exc:
        return CheckResult(name, FAILED, _one_line(str(exc)))
    except (Exception, SystemExit) as exc:  # a world's sys.exit() fails the check, no more
        return CheckResult(name, FAILED, _one_line(f"raised {type(exc).__name__}: {exc}"))
    status, detail = out if isinstance(out, tuple) else (PASSED, out)
    return CheckResult(name, status, _one_line(detail))


def _resolve_world(world_or_name: Any, options: dict[str, Any] | None) -> tuple[Any, str | None]:
    if isinstance(world_or_name, str):
        return make_world(world_or_name, **(options or {})), world_or_name
    if options:
        raise PacplanError("check_world: options apply only to a world given by name")
    return world_or_name, None


def check_world(world_or_name: Any, options: dict[str, Any] | None = None,
                seeds: Sequence[int] | np.ndarray = DEFAULT_SEEDS,
                thetas: np.ndarray | None = None, n_policies: int = 4,
                timeout_s: float | None = DEFAULT_CALL_TIMEOUT_S) -> CheckReport:
    """Run every check in `CHECKS` on a world (an object, or a registered name built with
    `options`) and report each; never raises for a broken world, only for bad arguments.

    `thetas` (k, d) replaces the default policies: zeros and `n_policies` − 1 N(0, 0.1²) draws.
    `timeout_s` limits each call into the world (None: no limit); a call that hangs fails its
    check and skips the rest.
    """
    if timeout_s is not None and not (isinstance(timeout_s, int | float)
                                      and math.isfinite(timeout_s) and timeout_s > 0):
        raise PacplanError(f"check_world timeout_s must be a positive number, got {timeout_s!r}")
    seed_arr = check_seeds(seeds, "check_world seeds")
    if seed_arr.size == 0 or np.unique(seed_arr).size != seed_arr.size:
        raise PacplanError("check_world seeds must be one or more distinct seeds")
    check_int(n_policies, "check_world n_policies", minimum=1)
    world, name = _resolve_world(world_or_name, options)
    ctx = _Context(world, name, dict(options or {}), seed_arr, thetas, n_policies,
                   timeout_s=timeout_s)
    report = CheckReport(world=name or str(getattr(world, "name", type(world).__name__)),
                         options=ctx.options, seeds=seed_arr.tolist(), n_policies=n_policies)
    done: dict[str, str] = {}
    for check_name, check, needs in CHECKS:
        blocked = [n for n in needs if done.get(n) not in (PASSED, WARNING)]
        if ctx.hung:
            result = CheckResult(check_name, SKIPPED, "a call into the world hung")
        elif blocked:
            result = CheckResult(check_name, SKIPPED, f"needs {', '.join(blocked)}")
        else:
            result = _run_check(check_name, check, ctx)
        done[check_name] = result.status
        report.results.append(result)
    report.policy_dim = ctx.dim
    report.n_policies = ctx.thetas.shape[0] if ctx.dim is not None else n_policies
    if done["timing"] == PASSED:
        report.seconds_per_rollout = ctx.warm_s / ctx.costs.size
    return report
