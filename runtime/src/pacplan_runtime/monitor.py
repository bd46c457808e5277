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
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from pacplan_runtime.bundle import PlannerError

_LOW_CAP = 0.2  # bet fractions u ≤ this carry _LOW_WEIGHT of the mixture
_LOW_WEIGHT = 0.9
_LOW_POINTS = 40
_HIGH_POINTS = 39
_HIGH_CAP = 0.98


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
                or not 0.0 < float(resolution) <= 0.1):
            raise PlannerError(f"resolution must be a number in (0, 0.1], got {resolution!r}")
        self._u, self._logw = bet_fractions()
        self._threshold = math.log(1.0 / self.alpha)
        steps = math.floor(1.0 / float(resolution) + 1e-9)
        grid = np.arange(1, steps + 1) * float(resolution)
        self._m = np.unique(np.append(grid[grid < 1.0], self.certified))
        self._log_c = np.zeros_like(self._u)  # log wealth of each bet at m = certified
        self._log_m = np.zeros((self._u.size, self._m.size))  # … at each m of the grid
        self.episodes = 0
        self.alarm = False
        self.alarm_episode: int | None = None
        self._lower = 0.0

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

    def state(self) -> dict[str, Any]:
        """A JSON-ready snapshot for logs."""
        return {"certified": self.certified, "alpha": self.alpha, "episodes": self.episodes,
                "alarm": self.alarm, "alarm_episode": self.alarm_episode,
                "lower": self._lower, "log_e_value": self.log_e_value}

    def __repr__(self) -> str:
        verdict = (f"alarm at episode {self.alarm_episode}" if self.alarm else "holding")
        return (f"CertificateMonitor(certified={self.certified:.4f}, alpha={self.alpha:g}: "
                f"{verdict} after {self.episodes} episodes, lower bound {self._lower:.4f})")
