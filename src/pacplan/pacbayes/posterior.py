"""Optimize the posterior p over m stored policies so that a PAC-Bayes bound is smallest.

Why Gibbs is exact: every bound grows with both the empirical cost Ĉ(p) = c̄ᵀp and KL(p‖p0).
For any fixed KL budget, the p of least Ĉ is the Gibbs distribution p_β ∝ p0·exp(−β c̄)
(Lagrange duality of a linear objective under a KL ball), so the optimum lies on the
one-parameter curve β ∈ [0, ∞], β = ∞ meaning all mass on the best column(s). Minimizing a
bound is then a 1-D search: a dense log-grid over β, refined by zooming grids around the
best grid points.

`rep` (`pacplan.pacbayes.rep`) is the paper's relative-entropy program, kept as the slow
baseline that Gibbs is checked against; what both share (the `Posterior` record, KL, evaluating
a candidate) is `pacplan.pacbayes.evaluate`.
"""

from __future__ import annotations

import math

import numpy as np

from pacplan.choices import SOLVERS
from pacplan.errors import PacplanError
from pacplan.pacbayes.evaluate import (
    Objective,
    Posterior,
    bound_objective,
    check_inputs,
    column_means,
    evaluate_posterior,
    kl_divergence,
    mixture_costs,
    posterior_at,
    uniform_prior,
    validate_choice,
)
from pacplan.validation import check_choice, check_probability_vector

# what a posterior is and how it is evaluated live in `evaluate` (shared with `rep`); they are
# part of this module's interface too, where callers have always found them
__all__ = ["DECISION_TOLERANCE", "Posterior", "column_means", "column_prior",
           "evaluate_posterior", "kl_divergence", "mixture_costs", "optimize", "optimize_gibbs",
           "optimize_gibbs_columns", "optimize_gibbs_columns_means", "optimize_gibbs_means",
           "uniform_prior"]

# --------------------------------------------------------------------------- Gibbs (default)


class _GibbsCurve:
    """Ĉ(β) and KL(β) of p_β ∝ p0·exp(−β c̄), computed stably in log space."""

    def __init__(self, cbar: np.ndarray, p0: np.ndarray):
        support = p0 > 0
        self.cbar = cbar
        self.p0 = p0
        self.cmin = float(cbar[support].min())
        # shift ≥ 0 on the prior's support; off it ln p0 = −inf already removes the column
        self.shift = np.where(support, cbar - self.cmin, 0.0)
        with np.errstate(divide="ignore"):
            self.logp0 = np.log(p0)
        best = support & (self.shift == 0.0)
        self.p_inf = np.where(best, p0, 0.0) / p0[best].sum()
        gaps = self.shift[support & (self.shift > 0)]
        self.gap = float(gaps.min()) if gaps.size else 0.0
        self.spread = float(gaps.max()) if gaps.size else 0.0
        self.top = float(self.logp0[best].max())
        self.logp0_rel = self.logp0 - self.top

    def _unnormalized(self, beta: np.ndarray) -> np.ndarray:
        """w = p0·e^{−β(c̄ − c_min)} / p0_top, (len(beta), m), computed in place.

        Dividing by the largest prior mass on the best columns keeps every row's largest entry
        ≥ p0_best/p0_top, so nothing underflows to an all-zero row however large β is.
        """
        w = np.multiply.outer(-beta, self.shift)
        w += self.logp0_rel
        np.exp(w, out=w)
        return w

    def stats(self, beta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ĉ and KL for each finite β, via KL = −β(Ĉ − c_min) − ln Σ p0 e^{−β(c̄ − c_min)}."""
        beta = np.atleast_1d(np.asarray(beta, dtype=np.float64))
        out_c = np.empty(beta.size)
        out_k = np.empty(beta.size)
        block = max(1, 2_000_000 // max(self.cbar.size, 1))  # bounded memory for huge m
        for s in range(0, beta.size, block):
            b = beta[s : s + block]
            w = self._unnormalized(b)
            # row sums in NumPy's fixed pairwise order, not BLAS's gemv, whose summation order
            # depends on the CPU's kernel: certificates agree across machines
            z = w.sum(axis=1)
            w *= self.shift
            excess = w.sum(axis=1) / z  # Ĉ − c_min
            out_c[s : s + block] = self.cmin + excess
            out_k[s : s + block] = np.maximum(-b * excess - (np.log(z) + self.top), 0.0)
        return np.clip(out_c, 0.0, 1.0), out_k

    def p(self, beta: float) -> np.ndarray:
        if np.isinf(beta):
            return self.p_inf.copy()
        w = self._unnormalized(np.array([beta]))[0]
        return w / w.sum()


# A search decision is never made on a smaller relative difference of two bound values: far
# above the last-bit noise another CPU's exp and log put into them (≈1e-15; AVX-512 kernels
# differ from the C library's), far below what a certificate shows (1e-4). So the search takes
# the same path, and returns the same β, on every CPU (docs/reproducibility.md).
DECISION_TOLERANCE = 1e-9


def _first_minimum(values: np.ndarray) -> int:
    """The first index whose value is within DECISION_TOLERANCE of the least: the argmin,
    except that near-ties, which rounding decides, go to the earliest point."""
    least = float(values.min())
    return int(np.flatnonzero(values <= least + DECISION_TOLERANCE * abs(least))[0])


def _gibbs_search(curve: _GibbsCurve, objective: Objective, grid_points: int) -> float:
    """β minimizing `objective(Ĉ, KL)` over [0, ∞]: a log-grid, then zooming grids around minima.

    The bound along the curve need not be unimodal, so every local minimum of the coarse grid
    within 1e-3 of its least value is refined by repeated 33-point grids (each round shrinks the
    bracket 16-fold) until the bracket in ln β is narrower than 1e-6 (the bound is flat to
    ~1e-12 there). β = 0 (p = p0) rides along in the coarse grid and β = ∞ is compared in closed
    form. Values closer than DECISION_TOLERANCE (relative) count as equal, the earlier point
    (smaller β) winning, and β = ∞ over any finite β, so rounding never steers the search; the
    bound found is the least to within that tolerance. Everything is vectorized over β.
    """
    if curve.gap == 0.0:  # all columns equal on the prior's support: nothing to choose
        return 0.0

    def f(log_beta: np.ndarray) -> np.ndarray:
        emp, kl = curve.stats(np.exp(log_beta))
        return objective(emp, kl)

    def better(a: float, b: float) -> bool:  # a below b by more than rounding can explain
        return a < b - DECISION_TOLERANCE * abs(b)

    # β·gap ≈ 60 already puts e^-60 of relative mass off the best columns: the β = ∞ limit.
    # The grid's ends from the C library's log: the same bits on every CPU.
    xs = np.concatenate([[-np.inf], np.linspace(math.log(1e-4 / curve.spread),
                                                math.log(60.0 / curve.gap), grid_points)])
    values = f(xs)  # exp(−inf) = 0: the first entry is β = 0
    least = float(values.min())
    near = least + 1e-3 + DECISION_TOLERANCE * abs(least)
    inner = values[1:-1]
    interior = np.flatnonzero((inner <= values[:-2] * (1 + DECISION_TOLERANCE))
                              & (inner <= values[2:] * (1 + DECISION_TOLERANCE))
                              & (inner <= near)) + 1
    starts = sorted({_first_minimum(values), *interior.tolist()} - {0})

    best_x, best_value = -np.inf, float(values[0])
    for i in starts:  # in order of β: of equal minima, the smallest β wins
        lo, hi = xs[max(i - 1, 1)], xs[min(i + 1, xs.size - 1)]
        x, value = xs[i], float(values[i])
        least = value  # the least seen: the reference, so that near-ties cannot drift upwards
        while hi - lo > 1e-6:
            zoom = np.linspace(lo, hi, 33)
            zv = f(zoom)
            j = _first_minimum(zv)
            least = min(least, float(zv.min()))
            if not better(least, float(zv[j])):
                x, value = zoom[j], float(zv[j])
            lo, hi = zoom[max(j - 1, 0)], zoom[min(j + 1, 32)]
        if better(value, best_value):
            best_x, best_value = x, value
    kl_inf = -float(np.log(curve.p0[curve.p_inf > 0].sum()))
    # the β = ∞ limit unless a finite β is clearly better: where they tie, the canonical answer
    if not better(best_value, float(objective(np.array([curve.cmin]), np.array([kl_inf]))[0])):
        return float("inf")
    return math.exp(best_x)


def optimize_gibbs(costs: np.ndarray, delta: float, bound: str = "best",
                   p0: np.ndarray | None = None, grid_points: int = 129) -> Posterior:
    """Exact bound-optimal posterior over the columns of `costs` (N × m)."""
    cbar, n, p0 = check_inputs(costs, p0)
    return optimize_gibbs_means(cbar, n, delta, bound, p0, grid_points)


def optimize_gibbs_means(cbar: np.ndarray, n: int, delta: float, bound: str = "best",
                         p0: np.ndarray | None = None, grid_points: int = 129) -> Posterior:
    """The bound-optimal posterior from the column means c̄ alone, as if they came from N = `n`
    environments: all the Gibbs search needs, so `pacplan plan-n` can ask what a larger N
    would certify with the means held fixed."""
    cbar = np.asarray(cbar, dtype=np.float64)
    if cbar.ndim != 1 or cbar.size < 1 or not np.all(np.isfinite(cbar)):
        raise PacplanError(f"column means must be a non-empty finite vector, got {cbar.shape}")
    p0 = uniform_prior(cbar.size) if p0 is None else check_probability_vector(p0, cbar.size)
    validate_choice(bound, delta)
    curve = _GibbsCurve(cbar, p0)
    beta = _gibbs_search(curve, bound_objective(bound, n, delta), grid_points)
    return posterior_at(curve.p(beta), cbar, n, p0, bound, delta, "gibbs", beta)


def optimize_gibbs_columns(costs: np.ndarray, m: int, delta: float, bound: str = "best",
                           grid_points: int = 129) -> Posterior:
    """The bound-optimal posterior among those supported on the k columns of `costs` (N × k),
    which are k of the m policies of a uniform prior: a *screened* certificate.

    PAC-Bayes holds for every posterior at once, so restricting the support to columns chosen
    from the same data keeps the bound valid; KL is still taken against the uniform prior over
    all m, so it carries ln(m/k) more than a posterior over k alone would. Along the Gibbs curve
    with prior mass 1/m on each computed column (a sub-probability weight, summing to k/m) the
    curve's KL is exactly KL(p‖uniform over m), so the same exact 1-D search applies. The
    returned `p` has k entries, one per column of `costs`.
    """
    costs = np.asarray(costs)
    if costs.ndim != 2 or costs.shape[0] < 1 or costs.shape[1] < 1:
        raise PacplanError(f"cost matrix must be 2-D and non-empty (N × k), got shape "
                           f"{costs.shape}")
    k = costs.shape[1]
    if not isinstance(m, int | np.integer) or isinstance(m, bool) or m < k:
        raise PacplanError(f"the prior's m must be a whole number ≥ the {k} computed columns, "
                           f"got {m!r}")
    return optimize_gibbs_columns_means(column_means(costs), costs.shape[0], int(m), delta, bound,
                                        grid_points)


def optimize_gibbs_columns_means(cbar: np.ndarray, n: int, m: int, delta: float,
                                 bound: str = "best", grid_points: int = 129) -> Posterior:
    """`optimize_gibbs_columns` from the kept columns' means c̄ alone, as if from N = `n`
    environments (what `pacplan plan-n` predicts a screened run with)."""
    cbar = np.asarray(cbar, dtype=np.float64)
    if cbar.ndim != 1 or cbar.size < 1 or not np.all(np.isfinite(cbar)) or m < cbar.size:
        raise PacplanError(f"column means must be a non-empty finite vector of at most m = {m} "
                           f"columns, got shape {cbar.shape}")
    validate_choice(bound, delta)
    weights = column_prior(m, cbar.size)
    curve = _GibbsCurve(cbar, weights)
    beta = _gibbs_search(curve, bound_objective(bound, n, delta), grid_points)
    return posterior_at(curve.p(beta), cbar, n, weights, bound, delta, "gibbs", beta)


def column_prior(m: int, k: int) -> np.ndarray:
    """The uniform prior over m policies, on the k of them that were computed: 1/m each."""
    return np.full(k, 1.0 / m)


def optimize(costs: np.ndarray, delta: float, bound: str = "best", solver: str = "gibbs",
             p0: np.ndarray | None = None) -> Posterior:
    """Bound-optimal posterior with the chosen solver (`gibbs` default, `rep` the baseline)."""
    if check_choice("solver", solver, SOLVERS) == "gibbs":
        return optimize_gibbs(costs, delta, bound, p0)
    from pacplan.pacbayes.rep import optimize_rep

    return optimize_rep(costs, delta, bound, p0)
