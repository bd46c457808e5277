"""The paper's parametric relative-entropy program (REP, Veer & Majumdar 2020, Algorithm 2).

Kept as the slow baseline that the exact Gibbs search (`pacplan.pacbayes.posterior`) is checked
against. Solved with CVXPY and Clarabel (MOSEK when installed). For the quadratic and
kl-inverse bounds: a grid over the target Ĉ, each point a REP min KL(p‖p0) s.t. c̄ᵀp ≤ Ĉ,
refined by a bounded scalar search. For McAllester: a search over λ of the REP
min c̄ᵀp + KL(p‖p0)/(2Nλ), whose optimal value plus ln(2√N/δ)/(2Nλ) + λ/4 is the bound.
Every candidate p is re-evaluated exactly, so solver inaccuracy can only cost tightness.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.pacbayes import bounds
from pacplan.pacbayes.evaluate import (
    Posterior,
    bound_objective,
    check_inputs,
    kl_divergence,
    posterior_at,
    uniform_prior,
    validate_choice,
)


def _conic_solver() -> str:
    import cvxpy as cp

    return "MOSEK" if "MOSEK" in cp.installed_solvers() else "CLARABEL"


class _Rep:
    """DPP-parametrized CVXPY problems built once, so each grid point only re-solves."""

    def __init__(self, cbar: np.ndarray, p0: np.ndarray) -> None:
        import cvxpy as cp

        self.cbar, self.p0, self.m = cbar, p0, cbar.size
        self.solver = _conic_solver()
        self.p = cp.Variable(cbar.size, nonneg=True)
        self.target = cp.Parameter()
        self.weight = cp.Parameter(nonneg=True)
        kl = cp.sum(cp.rel_entr(self.p, p0))
        self.constrained = cp.Problem(cp.Minimize(kl), [cp.sum(self.p) == 1,
                                                        cbar @ self.p <= self.target])
        self.penalized = cp.Problem(cp.Minimize(cbar @ self.p + self.weight * kl),
                                    [cp.sum(self.p) == 1])

    def _solve(self, problem: Any) -> np.ndarray:
        """Solve and return a clean distribution (clipped at 0, renormalized)."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                problem.solve(solver=self.solver)
        except Exception as exc:  # solver failure: say so plainly
            raise PacplanError(f"REP solver {self.solver} failed: {exc}") from exc
        if self.p.value is None:
            raise PacplanError("REP solver returned no solution")
        q = np.clip(np.asarray(self.p.value, dtype=np.float64), 0.0, None)
        return q / q.sum() if q.sum() > 0 else uniform_prior(self.m)

    def at_lambda(self, log_lam: float, n: int, delta: float) -> tuple[float, np.ndarray]:
        """McAllester's bound at λ and the penalized REP's solution."""
        lam = np.exp(log_lam)
        self.weight.value = 1.0 / (2.0 * n * lam)
        q = self._solve(self.penalized)
        log_const = float(bounds.log_term(n, delta))  # finite for any δ > 0
        return float(self.penalized.value + log_const / (2.0 * n * lam) + lam / 4.0), q

    def at_target(self, c: float) -> np.ndarray | None:
        """The least-KL p with Ĉ ≤ c (None where a degenerate target makes the solver fail)."""
        self.target.value = c
        try:
            return self._solve(self.constrained)
        except PacplanError:  # degenerate targets (Ĉ at its minimum) can fail: skip them
            return None


def _scalar_refine(f: Callable[[float], float], points: np.ndarray, values: list[float],
                   steps: int) -> float:
    """Bounded Brent search between the neighbours of the best grid point."""
    from scipy.optimize import minimize_scalar

    i = int(np.argmin(values))
    a, b = points[max(i - 1, 0)], points[min(i + 1, points.size - 1)]
    res = minimize_scalar(f, bounds=(a, b), method="bounded", options={"maxiter": steps})
    return float(res.x)


def _mcallester_candidates(rep: _Rep, n: int, delta: float, grid_points: int,
                           refine_steps: int) -> list[np.ndarray]:
    grid = np.linspace(np.log(1e-4), np.log(4.0), grid_points)
    vals = [rep.at_lambda(x, n, delta) for x in grid]
    x = _scalar_refine(lambda v: rep.at_lambda(v, n, delta)[0], grid, [v for v, _ in vals],
                       refine_steps)
    return [q for _, q in vals] + [rep.at_lambda(x, n, delta)[1]]


def _target_candidates(rep: _Rep, evaluate: Callable[[np.ndarray], float], grid_points: int,
                       refine_steps: int) -> list[np.ndarray]:
    cbar, p0 = rep.cbar, rep.p0
    c_lo, c_hi = float(cbar[p0 > 0].min()), float(cbar @ p0)
    # Ĉ = c_lo exactly is the β = ∞ face: its REP solution is p0 restricted to the argmin
    at_min = np.where(cbar == c_lo, p0, 0.0)
    grid = np.linspace(c_lo, c_hi, grid_points)[1:]
    qs = [at_min / at_min.sum()] + [rep.at_target(c) for c in grid]
    vals = [evaluate(q) if q is not None else np.inf for q in qs]
    if not np.isfinite(vals).any():
        raise PacplanError(f"REP solver {rep.solver} failed on every grid point")

    def refine(c: float) -> float:
        q = rep.at_target(c)
        return evaluate(q) if q is not None else np.inf

    c = _scalar_refine(refine, np.concatenate([[c_lo], grid]), vals, refine_steps)
    return [q for q in [*qs, rep.at_target(c)] if q is not None]


def optimize_rep(costs: np.ndarray, delta: float, bound: str = "quadratic",
                 p0: np.ndarray | None = None, grid_points: int = 40,
                 refine_steps: int = 25) -> Posterior:
    """The paper's parametric relative-entropy program (slow baseline)."""
    cbar, n, p0 = check_inputs(costs, p0)
    validate_choice(bound, delta)
    rep = _Rep(cbar, p0)
    objective = bound_objective(bound, n, delta)

    def evaluate(q: np.ndarray) -> float:
        return float(objective(np.array([cbar @ q]), np.array([kl_divergence(q, p0)]))[0])

    if bound == "mcallester":
        candidates = _mcallester_candidates(rep, n, delta, grid_points, refine_steps)
    else:
        candidates = _target_candidates(rep, evaluate, grid_points, refine_steps)
    best_p, best_value = p0.copy(), evaluate(p0)
    for q in candidates:
        v = evaluate(q)
        if v < best_value:
            best_p, best_value = q, v
    return posterior_at(best_p, cbar, n, p0, bound, delta, f"rep:{rep.solver.lower()}", None)
