"""`CertificateMonitor`: is the deployed planner still meeting its certificate?

A certificate bounds the mean cost on the distribution the planner was certified on. Deployed,
the robot logs one cost per episode; this monitor tests H0: "the deployed mean cost is at most
the certified cost" after *every* episode, and its guarantee holds however long it runs and
however often it is looked at (anytime-valid): if the costs are independent, in [0, 1], with
mean ≤ certified, the probability that it *ever* raises an alarm is ≤ alpha.

The test is a betting e-process (Waudby-Smith & Ramdas, "Estimating means of bounded random
variables by betting", JRSS-B 2023; Ramdas et al., "Game-theoretic statistics and safe
anytime-valid inference", Statistical Science 2023). For a bet λ ∈ [0, 1/m) the wealth
K_t(m) = ∏ (1 + λ (X_i − m)) stays ≥ 0 (X_i ≥ 0), and under mean ≤ m it is a nonnegative
supermartingale with K_0 = 1, so Ville's inequality gives P(∃t: K_t(m) ≥ 1/alpha) ≤ alpha.
An average of such wealths with weights fixed in advance is one too (a mixture of bets). Here the
bets are λ = u/m over a fixed grid of fractions u ∈ (0, 1): 90 % of the weight on u ≤ 0.2
(where the Kelly bets against the shifts that matter lie: 12 % → 20 % is u ≈ 0.09), 10 % on
u up to 0.98 (fast alarms for large shifts). Nothing is tuned on the data, so the guarantee
needs no assumption beyond independence and the [0, 1] range.

The lower bound is the matching confidence sequence: each factor (1 − u) + u X/m is
non-increasing in m, so {m : K_t(m) ≥ 1/alpha} is an interval [0, L_t]; with probability
≥ 1 − alpha the true mean exceeds L_t at every t at once. `lower` is its running maximum on a
grid of m with step `resolution` (rounded down: conservative). The alarm is K_t(certified) ≥
1/alpha, computed exactly at the certified cost; once raised it stays.

A log of many episodes goes through `update_many`: the same alarm episode and bounds as
`update` one cost at a time, at a small fraction of the cost (benchmarks/monitor_throughput.py).
The alarm statistic is computed per episode with `update`'s own operations (the same floats).
The grid's wealth is a product, so a block's factors are multiplied and one log is taken per
block (a zero cost's factor is 1 − u at every m; a cost repeated in the block adds count × a
table of its log factors); and the bound can only rise at an episode where the next grid mean's
own evidence reaches 1/alpha, so that one column is followed per episode and only such episodes
take `update`'s full step. The grid's sums differ from `update`'s by rounding alone (about
1e-13 relative), which could move the bound only at a tie with 1/alpha to that precision.
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any

import numpy as np

from pacplan_runtime.bundle import PlannerError

_LOW_CAP = 0.2  # bet fractions u ≤ this carry _LOW_WEIGHT of the mixture
_LOW_WEIGHT = 0.9
_LOW_POINTS = 40
_HIGH_POINTS = 39
_HIGH_CAP = 0.98
MIN_RESOLUTION = 1e-4  # a finer grid costs 79 × 1/resolution logs an episode (and their memory)
MAX_RESOLUTION = 0.1
_BLOCK = 64  # most nonzero costs folded into one product before its log (see _block_size)
_SPAN = 1024  # most episodes in one block
_TABLE_COUNT = 8  # a cost this often in one block gets a table of its log factors …
_TABLES = 8  # … and this many such tables are kept (0/1 or a few discrete costs)
_MARGIN = 1e-9  # a grid mean whose evidence comes this close to 1/alpha takes the exact step


def bet_fractions() -> tuple[np.ndarray, np.ndarray]:
    """The mixture's bet fractions u (bet λ = u / m) and their log-weights (summing to 1)."""
    low = _LOW_CAP * np.arange(1, _LOW_POINTS + 1) / _LOW_POINTS
    high = _LOW_CAP + (_HIGH_CAP - _LOW_CAP) * np.arange(1, _HIGH_POINTS + 1) / _HIGH_POINTS
    u = np.concatenate([low, high])
    w = np.concatenate([np.full(_LOW_POINTS, _LOW_WEIGHT / _LOW_POINTS),
                        np.full(_HIGH_POINTS, (1 - _LOW_WEIGHT) / _HIGH_POINTS)])
    return u, np.log(w)


def _logsumexp(x: np.ndarray, axis: int = 0) -> np.ndarray:
    top = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(top, axis=axis) + np.log(np.sum(np.exp(x - top), axis=axis))


def check_certified(certified: Any, alpha: Any) -> tuple[float, float]:
    """(certified, alpha) as floats, or a PlannerError: certified in (0, 1], alpha in (0, 1)."""
    for name, v in (("certified cost", certified), ("alpha", alpha)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise PlannerError(f"{name} must be a number, got {v!r}")
    c, a = float(certified), float(alpha)
    if not 0.0 < c <= 1.0:
        raise PlannerError(f"certified cost must be in (0, 1], got {c!r}")
    if c < sys.float_info.min:  # cost / c overflows: every bet's wealth is inf, the evidence NaN
        raise PlannerError(f"certified cost must be at least {sys.float_info.min:.4g} (a normal "
                           f"float: below it the bets' wealth overflows), got {c!r}")
    if not 0.0 < a < 1.0:
        raise PlannerError(f"alpha must be in (0, 1), got {a!r}")
    return c, a


def check_cost(cost: Any, where: str = "cost") -> float:
    """One episode's cost as a float in [0, 1], or a PlannerError naming `where` (never
    clipped: a cost outside [0, 1] means the logging, not the robot, is wrong)."""
    if isinstance(cost, np.ndarray) and cost.ndim == 0 and cost.dtype.kind in "fiu":
        cost = cost.item()  # a 0-d array, as numpy reductions of arrays can return
    if isinstance(cost, bool) or not isinstance(cost, numbers.Real):
        raise PlannerError(f"{where}: {cost!r} is not a number")
    x = float(cost)
    if math.isnan(x):
        raise PlannerError(f"{where}: NaN is not a cost")
    if not 0.0 <= x <= 1.0:
        raise PlannerError(f"{where}: {x!r} is not a cost in [0, 1]")
    return x


def log_evidence(costs: np.ndarray, certified: float) -> np.ndarray:
    """log K_t(certified) after each episode, along the last axis of `costs` (any leading axes
    are independent streams): the monitor's alarm statistic, vectorised for Monte Carlo. The
    monitor alarms at the first t with this ≥ log(1/alpha)."""
    x = np.asarray(costs, dtype=np.float64)
    c, _ = check_certified(certified, 0.5)
    if x.size and (np.isnan(x).any() or x.min() < 0 or x.max() > 1):
        raise PlannerError("costs must lie in [0, 1] (no NaN)")
    u, logw = bet_fractions()
    out: np.ndarray | None = None
    for uk, lw in zip(u, logw):
        wealth = np.cumsum(np.log((1.0 - uk) + uk * x / c), axis=-1) + lw
        out = wealth if out is None else np.logaddexp(out, wealth)
    assert out is not None
    return out


def _reaching(log_terms: np.ndarray, level: float, axis: int) -> np.ndarray:
    """Indices along the other axis where the logsumexp over `axis` is ≥ level, computed as
    `_logsumexp` does, but only where max + log(count) (its upper bound) gets there."""
    bound = np.max(log_terms, axis=axis) + math.log(log_terms.shape[axis]) + _MARGIN
    maybe = np.flatnonzero(bound >= level)
    if not maybe.size:
        return maybe
    exact = _logsumexp(np.take(log_terms, maybe, axis=1 - axis), axis=axis)
    return maybe[exact >= level]


def _block_size(smallest_mean: float) -> int:
    """Most nonzero costs whose factors 1 + u x / ((1 − u) m) ≤ 1 + 49 / m (u ≤ 0.98) can be
    multiplied without overflow: their product stays below e^690."""
    return max(1, min(_BLOCK, int(690.0 / math.log1p(49.0 / smallest_mean))))


def _checked_costs(costs: Any, done: int) -> np.ndarray:
    """Costs as a 1-D float64 array, every one checked as `check_cost` would (naming the
    episode, counted from `done`); a list is checked element by element (True is no cost)."""
    if not isinstance(costs, np.ndarray):
        return np.array([check_cost(c, f"cost of episode {done + i + 1}")
                         for i, c in enumerate(costs)], dtype=np.float64)
    if costs.ndim != 1 or costs.dtype.kind not in "fiu":
        raise PlannerError(f"costs must be a 1-D array of numbers, got shape {costs.shape} of "
                           f"{costs.dtype}")
    x = costs.astype(np.float64)
    bad = np.flatnonzero(~((x >= 0.0) & (x <= 1.0)))  # NaN fails both
    if bad.size:
        check_cost(float(x[bad[0]]), f"cost of episode {done + int(bad[0]) + 1}")
    return x


class CertificateMonitor:
    """Anytime-valid alarm for "the deployed mean cost exceeds the certified cost".

    `update(cost)` after each episode; `alarm` is raised (and stays) once the evidence against
    mean ≤ certified reaches 1/alpha. If the costs are independent in [0, 1] with mean ≤
    certified, P(an alarm is ever raised) ≤ alpha. `lower` is an anytime-valid lower
    confidence bound on the deployed mean (level 1 − alpha, simultaneously over episodes).
    """

    def __init__(self, certified: float, alpha: float = 0.01, resolution: float = 2e-3) -> None:
        self.certified, self.alpha = check_certified(certified, alpha)
        if (isinstance(resolution, bool) or not isinstance(resolution, numbers.Real)
                or not MIN_RESOLUTION <= float(resolution) <= MAX_RESOLUTION):
            raise PlannerError(f"resolution must be a number in [{MIN_RESOLUTION:g}, "
                               f"{MAX_RESOLUTION:g}] (a finer grid costs 79 logs per grid mean "
                               f"and episode), got {resolution!r}")
        self._u, self._logw = bet_fractions()
        self._threshold = -math.log(self.alpha)  # log(1 / alpha) without 1 / alpha = inf
        steps = math.floor(1.0 / float(resolution) + 1e-9)
        grid = np.arange(1, steps + 1) * float(resolution)
        self._m = np.unique(np.append(grid[grid < 1.0], self.certified))
        self._log_c = np.zeros_like(self._u)  # log wealth of each bet at m = certified
        self._log_m = np.zeros((self._u.size, self._m.size))  # … at each m of the grid
        self.episodes = 0
        self.alarm = False
        self.alarm_episode: int | None = None
        self._lower = 0.0
        self._block = _block_size(float(self._m[0]))
        self._log_keep = np.log((1.0 - self._u) + self._u * 0.0)  # a zero cost's step
        self._scratch: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # update_many's
        self._tables: dict[float, np.ndarray] = {}  # … and its log factors of repeated costs

    @property
    def lower(self) -> float:
        """Anytime-valid lower confidence bound on the deployed mean cost (0 before evidence)."""
        return self._lower

    @property
    def log_e_value(self) -> float:
        """log of the current evidence K_t(certified) against mean ≤ certified (alarm at
        log(1/alpha))."""
        return float(_logsumexp(self._logw + self._log_c))

    def update(self, cost: float) -> bool:
        """Add one episode's cost (in [0, 1]); True from the episode the alarm is raised on."""
        x = check_cost(cost, f"cost of episode {self.episodes + 1}")
        u = self._u
        self._log_c += np.log((1.0 - u) + u * (x / self.certified))
        self._log_m += np.log((1.0 - u)[:, None] + u[:, None] * (x / self._m)[None, :])
        self.episodes += 1
        if not self.alarm and self.log_e_value >= self._threshold:
            self.alarm = True
            self.alarm_episode = self.episodes
        rejected = _logsumexp(self._logw[:, None] + self._log_m, axis=0) >= self._threshold
        n = int(np.argmin(rejected)) if not rejected.all() else rejected.size
        if n:  # the rejected m's form a prefix; take it only up to the first gap (conservative)
            self._lower = max(self._lower, float(self._m[n - 1]))
        return self.alarm

    def update_many(self, costs: Any) -> np.ndarray:
        """Add many episodes' costs, in order: the same alarm episode and lower bounds as
        `update` on each in turn, far faster (module docstring). Returns the lower bound after
        each episode. A bad cost is a PlannerError naming its episode, and none is added."""
        x = _checked_costs(costs, self.episodes)
        lowers = np.empty(x.size)
        nonzero = np.flatnonzero(x > 0)
        i = 0
        while i < x.size:  # a block: at most _SPAN episodes, of which self._block nonzero
            k = int(np.searchsorted(nonzero, i)) + self._block
            block = x[i:min(i + _SPAN, int(nonzero[k]) if k < nonzero.size else x.size)]
            n = self._quiet_prefix(block)
            if n:
                self._fold(block[:n])
                lowers[i:i + n] = self._lower
            if n < block.size:  # the bound may rise at this episode: update's exact step
                self.update(float(block[n]))
                lowers[i + n] = self._lower
                n += 1
            i += n
        return lowers

    def _quiet_prefix(self, x: np.ndarray) -> int:
        """How many of the episodes `x` (from now) come before the first at which the lower
        bound could rise: the next grid mean m above it is rejected only where its own evidence
        reaches 1/alpha (if m is not rejected, the rejected prefix ends below it)."""
        j = int(np.searchsorted(self._m, self._lower, side="right"))
        if j == self._m.size:
            return x.size
        steps = self._steps(x, float(self._m[j])).T
        wealth = np.cumsum(np.concatenate([self._log_m[:, j:j + 1], steps], axis=1), axis=1)
        hits = _reaching(self._logw[:, None] + wealth[:, 1:], self._threshold - _MARGIN, 0)
        return int(hits[0]) if hits.size else x.size

    def _steps(self, x: np.ndarray, m: float) -> np.ndarray:
        """log((1 − u) + u x / m) for each episode (rows) and bet (columns), as `update`
        computes it; a zero cost's row is log(1 − u), computed once."""
        u = self._u[None, :]
        out = np.empty((x.size, u.size))
        out[:] = self._log_keep
        nonzero = np.flatnonzero(x > 0)
        if nonzero.size:
            out[nonzero] = np.log((1.0 - u) + u * (x[nonzero] / m)[:, None])
        return out

    def _fold(self, x: np.ndarray) -> None:
        """Add episodes at which the lower bound does not rise: the alarm statistic per
        episode (the same operations as `update`), the grid's wealth as one product."""
        steps = self._steps(x, self.certified)
        wealth = np.cumsum(np.concatenate([self._log_c[None, :], steps]), axis=0)[1:]
        if not self.alarm:
            hits = _reaching(self._logw[None, :] + wealth, self._threshold, 1)
            if hits.size:
                self.alarm = True
                self.alarm_episode = self.episodes + int(hits[0]) + 1
        self._log_c = wealth[-1].copy()
        # (1 − u) + u·x/m = (1 − u)(1 + r·x) with r = u / ((1 − u) m): the 1 − u of every
        # episode is one term, the rest a product of factors ≥ 1 (a zero cost's is 1); a cost
        # repeated in the block (0/1 costs) adds count × its table of log(1 + r·x)
        self._log_m += x.size * np.log1p(-self._u)[:, None]
        values, counts = np.unique(x[x > 0], return_counts=True)
        if not values.size:
            self.episodes += x.size
            return
        if self._scratch is None:  # kept: fresh pages for every block cost more than the sums
            r = (self._u / (1.0 - self._u))[:, None] / self._m[None, :]
            self._scratch = (r, np.empty_like(r), np.empty_like(r))
        r, product, factor = self._scratch
        multiplied = False
        for value, count in zip(values.tolist(), counts.tolist()):
            table = self._tables.get(value)
            if table is None and count >= _TABLE_COUNT:
                if len(self._tables) == _TABLES:
                    del self._tables[next(iter(self._tables))]
                table = self._tables[value] = np.log1p(r * value)
            if table is not None:
                self._log_m += np.multiply(table, count, out=factor)
                continue
            for _ in range(count):
                np.multiply(r, value, out=factor if multiplied else product)
                if multiplied:
                    factor += 1.0
                    product *= factor
                else:
                    product += 1.0
                    multiplied = True
        if multiplied:
            self._log_m += np.log(product, out=product)
        self.episodes += x.size

    def state(self) -> dict[str, Any]:
        """A JSON-ready snapshot for logs."""
        return {"certified": self.certified, "alpha": self.alpha, "episodes": self.episodes,
                "alarm": self.alarm, "alarm_episode": self.alarm_episode,
                "lower": self._lower, "log_e_value": self.log_e_value}

    def __repr__(self) -> str:
        verdict = (f"alarm at episode {self.alarm_episode}" if self.alarm else "holding")
        return (f"CertificateMonitor(certified={self.certified:.4f}, alpha={self.alpha:g}: "
                f"{verdict} after {self.episodes} episodes, lower bound {self._lower:.4f})")
