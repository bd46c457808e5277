"""PAC-Bayes bounds on the expected cost of a posterior, vectorized over numpy arrays.

All three bounds hold on the same event of probability ≥ 1 − δ (Maurer's kl bound; McAllester
and the quadratic bound are relaxations of it), so a certificate may report all of them and
certify the smallest. With R = (KL + ln(2√N/δ)) / (2N) and empirical cost Ĉ:

- McAllester:  Ĉ + √R
- quadratic:   (√(Ĉ + R) + √R)²          (Rivasplata et al. 2019)
- kl-inverse:  sup{c ∈ [Ĉ, 1] : kl(Ĉ‖c) ≤ 2R}  (Maurer 2004; Langford & Seeger 2001)

kl inversion returns the *upper* end of its bracket: a rounded bound is never below the exact one.
"""

from __future__ import annotations

import numpy as np

from pacplan.choices import BOUND_CHOICES, BOUNDS
from pacplan.validation import (
    check_choice,
    check_delta,
    check_emp_cost,
    check_kl,
    check_kl_budget,
    check_n,
)

_NEWTON_STEPS = 60
_NUDGE = 1e-12  # kl inverse is returned this far above its root, relative (promise: 1e-9)
_TINY = 2.0**-1070  # and a few subnormal ulps, where a relative nudge of x underflows to 0
_ONE_MINUS = 1.0 - 1e-15


def kl_bernoulli(q: float | np.ndarray, p: float | np.ndarray) -> np.ndarray:
    """kl(q‖p) between Bernoulli(q) and Bernoulli(p), with 0·ln 0 = 0 and +inf where undefined.

    Written with d = p − q and log1p, so that for p near q (tiny kl budgets) the first-order
    terms cancel exactly instead of losing every digit to log q − log p.
    """
    q = np.asarray(q, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    d = p - q
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        a = np.where(q > 0.0, -q * _log_ratio(p, np.where(q > 0.0, q, 1.0), d), 0.0)
        b = np.where(q < 1.0, -(1.0 - q) * np.log1p(-d / np.where(q < 1.0, 1.0 - q, 1.0)), 0.0)
    out = a + b
    return np.where(np.isnan(out), np.inf, np.maximum(out, 0.0))


def _log_ratio(x: np.ndarray, q: np.ndarray, d: np.ndarray) -> np.ndarray:
    """ln(x/q) for q > 0 and d = x − q: log1p(d/q), exact to the last digits when x is near q.
    Where d/q overflows (a subnormal q, say Ĉ = 5e-324) x is ≫ q, so ln x − ln q loses nothing;
    without this the term was −q·∞ and a kl of 0 made every p look inside the budget."""
    r = d / q
    return np.where(np.isfinite(r), np.log1p(r), np.log(x) - np.log(q))


def kl_inverse(q: float | np.ndarray, c: float | np.ndarray) -> np.ndarray:
    """Upper kl inverse: sup{p ∈ [q, 1] : kl(q‖p) ≤ c}, never below the exact value.

    f(p) = kl(q‖p) − c is convex and increasing on [q, 1), so Newton's method started right of
    the root (Pinsker: the root is ≤ q + √(c/2)) stays right of it and converges monotonically;
    each iterate is the upper end of a bracket, stopped when a step is below 1e-15 of it. A
    final nudge of 1e-12 relative covers round-off (the error of f's evaluation moves the root
    by a few ulps of p, so a tiny bound, from a huge N, stays within 1e-12 of itself).
    """
    q = check_emp_cost(q)
    c = check_kl_budget(c)
    return _kl_inverse(q, c)


def _kl_inverse(q: np.ndarray, c: np.ndarray) -> np.ndarray:
    """kl_inverse without input checks, for inner loops whose inputs are already valid."""
    q, c = np.broadcast_arrays(np.asarray(q, dtype=np.float64), np.asarray(c, dtype=np.float64))
    # two upper starts: Pinsker, and kl ≥ (p − q)²/(2p), which is tighter for small q; its
    # √(c² + 2qc) taken as √c·√(c + 2q), which does not underflow to 0 (q = c = 1e-300 put the
    # start, and so the result, left of the root)
    with np.errstate(over="ignore"):  # a huge budget: the start is +inf, clipped below 1
        start = np.minimum(q + np.sqrt(c / 2.0), q + c + np.sqrt(c) * np.sqrt(c + 2.0 * q))
    x = np.clip(start, q, _ONE_MINUS)
    active = (q < 1.0) & (c > 0.0)
    # where even p → 1 stays inside the budget, the supremum is 1
    reaches_one = active & (kl_bernoulli(q, _ONE_MINUS) <= c)
    active &= ~reaches_one
    # kl(q‖x) = −q·log1p(d/q) − (1−q)·log1p(−d/(1−q)), d = x − q; q-only parts hoisted
    wa, wb = np.where(q > 0.0, q, 0.0), np.where(q < 1.0, 1.0 - q, 0.0)
    qa, qb = np.where(q > 0.0, q, 1.0), np.where(q < 1.0, 1.0 - q, 1.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for _ in range(_NEWTON_STEPS):
            d = x - q
            f = -wa * _log_ratio(x, qa, d) - wb * np.log1p(-d / qb) - c
            slope = d / (x * (1.0 - x))
            step = np.where(active & (f > 0) & (slope > 0), f / slope, 0.0)
            x = np.maximum(x - step, q)
            if not np.any(step > 1e-15 * x):
                break
    out = np.where(active, np.minimum(x + (_NUDGE * x + _TINY), 1.0), np.where(c > 0, 1.0, q))
    out = np.where(q >= 1.0, 1.0, out)
    return np.where(reaches_one, 1.0, out)


def kl_inverse_lower(q: float | np.ndarray, c: float | np.ndarray) -> np.ndarray:
    """Lower kl inverse: inf{p ∈ [0, q] : kl(q‖p) ≤ c}, returned as the lower end of the bracket."""
    q = check_emp_cost(q)
    return 1.0 - kl_inverse(1.0 - q, c)


def r_term(kl: float | np.ndarray, n: int | np.ndarray, delta: float | np.ndarray) -> np.ndarray:
    """R = (KL + ln(2√N/δ)) / (2N), the complexity term shared by the three bounds."""
    k, nn, d = check_kl(kl), check_n(n), check_delta(delta)
    return (k + log_term(nn, d)) / (2.0 * nn)


def log_term(n: int | np.ndarray, delta: float | np.ndarray) -> np.ndarray:
    """ln(2√N/δ), unchecked: the one formula of R's confidence term, shared with the posterior
    search so that it optimizes the very numbers a certificate reports. A tiny δ (5e-324)
    overflows 2√N/δ, not its logarithm: there it is ln 2 + ½ ln N − ln δ (the same bits
    wherever 2√N/δ fits, so no certificate moved)."""
    nn, d = np.asarray(n, dtype=np.float64), np.asarray(delta, dtype=np.float64)
    with np.errstate(over="ignore", divide="ignore"):
        direct = np.log(2.0 * np.sqrt(nn) / d)
    return np.where(np.isfinite(direct), direct, np.log(2.0) + 0.5 * np.log(nn) - np.log(d))


def mcallester(emp: float | np.ndarray, kl: float | np.ndarray, n: int | np.ndarray,
               delta: float | np.ndarray) -> np.ndarray:
    """McAllester's bound Ĉ + √R."""
    return bound_from_r("mcallester", check_emp_cost(emp), r_term(kl, n, delta))


def quadratic(emp: float | np.ndarray, kl: float | np.ndarray, n: int | np.ndarray,
              delta: float | np.ndarray) -> np.ndarray:
    """The quadratic bound (√(Ĉ + R) + √R)²."""
    return bound_from_r("quadratic", check_emp_cost(emp), r_term(kl, n, delta))


def klinv(emp: float | np.ndarray, kl: float | np.ndarray, n: int | np.ndarray,
          delta: float | np.ndarray) -> np.ndarray:
    """The kl-inverse bound sup{c : kl(Ĉ‖c) ≤ 2R}: the tightest of the three."""
    return bound_from_r("klinv", check_emp_cost(emp), r_term(kl, n, delta))


def bound_from_r(name: str, emp: np.ndarray, r: np.ndarray) -> np.ndarray:
    """A bound (or `best`, the smallest) from Ĉ and R, unchecked: for optimizers' inner loops."""
    if name == "mcallester":
        return emp + np.sqrt(r)
    if name == "quadratic":
        with np.errstate(over="ignore"):  # beyond float64 only when R is: +inf, vacuous
            return (np.sqrt(emp + r) + np.sqrt(r)) ** 2
    if name == "klinv":
        return _kl_inverse(emp, 2.0 * r)
    if name == "best":  # kl-inverse is never above the other two, but take the min to be exact
        return np.minimum.reduce([bound_from_r(b, emp, r) for b in BOUNDS])
    check_choice("bound", name, BOUND_CHOICES)
    raise AssertionError(name)  # every choice is handled above


BOUND_FUNCTIONS = {"mcallester": mcallester, "quadratic": quadratic, "klinv": klinv}


def all_bounds(emp: float, kl: float, n: int, delta: float) -> dict[str, float]:
    """The three bounds as plain floats, keyed by name."""
    return {name: float(fn(emp, kl, n, delta)) for name, fn in BOUND_FUNCTIONS.items()}


def bound_value(name: str, emp: float | np.ndarray, kl: float | np.ndarray,
                n: int | np.ndarray, delta: float | np.ndarray) -> np.ndarray:
    """Evaluate a bound by name, with input checks; `best` is the smallest of the three."""
    return bound_from_r(name, check_emp_cost(emp), r_term(kl, n, delta))
