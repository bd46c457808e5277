"""What every posterior solver shares: the `Posterior` record, the column means c̄, the
posterior's mixture costs, KL(p‖p0), the bound as a function of (Ĉ, KL), and evaluating a given
posterior on a cost matrix.

Below both solvers: the Gibbs search (`pacplan.pacbayes.posterior`) and the paper's program
(`pacplan.pacbayes.rep`) build on it, so neither needs the other to evaluate a candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pacplan.choices import BOUND_CHOICES
from pacplan.errors import PacplanError
from pacplan.pacbayes import bounds
from pacplan.validation import check_choice, check_delta, check_probability_vector

Objective = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class Posterior:
    """A posterior over the m policies and what it certifies on its certification matrix."""

    p: np.ndarray
    emp_cost: float
    kl: float
    bound: str
    value: float
    solver: str
    beta: float | None = None


def column_means(costs: np.ndarray) -> np.ndarray:
    """c̄: the empirical cost of each policy (column) of an N × m cost matrix (float64 sums)."""
    return np.asarray(costs).mean(axis=0, dtype=np.float64)


def mixture_costs(costs: np.ndarray, p: np.ndarray, block_rows: int = 65_536) -> np.ndarray:
    """Each environment's cost under the posterior, Σ_j C_ij p_j, in a fixed summation order.

    Not `costs @ p`: BLAS sums a matrix–vector product in an order its CPU-specific kernel
    chooses, so the same run gave certificates differing in their last bits on two machines
    (docs/reproducibility.md). Row blocks keep the float64 temporary small for a large matrix.
    """
    costs = np.asarray(costs)
    p = np.asarray(p, dtype=np.float64)
    out = np.empty(costs.shape[0])
    for start in range(0, costs.shape[0], block_rows):
        block = np.asarray(costs[start : start + block_rows], dtype=np.float64) * p
        out[start : start + block_rows] = block.sum(axis=1)
    return out


def uniform_prior(m: int) -> np.ndarray:
    return np.full(m, 1.0 / m)


def kl_divergence(p: np.ndarray, p0: np.ndarray) -> float:
    """KL(p‖p0) for distributions over a finite set, with 0·ln 0 = 0."""
    p = np.asarray(p, dtype=np.float64)
    mask = p > 0
    if np.any(p0[mask] <= 0):
        return float("inf")
    return float(np.sum(p[mask] * (np.log(p[mask]) - np.log(p0[mask]))))


def check_inputs(costs: np.ndarray, p0: np.ndarray | None) -> tuple[np.ndarray, int, np.ndarray]:
    """(c̄, N, p0) of a valid N × m matrix; the matrix itself is not copied."""
    costs = np.asarray(costs)
    if costs.ndim != 2 or costs.shape[0] < 1 or costs.shape[1] < 1:
        raise PacplanError(
            f"cost matrix must be 2-D and non-empty (N × m), got shape {costs.shape}"
        )
    m = costs.shape[1]
    p0 = uniform_prior(m) if p0 is None else check_probability_vector(p0, m)
    return column_means(costs), costs.shape[0], p0


def bound_objective(bound: str, n: int, delta: float) -> Objective:
    """The bound as a function of (Ĉ, KL) arrays, with N and δ checked once, not per call."""
    bounds.bound_value(bound, 0.0, 0.0, n, delta)  # validates every argument once
    # bounds' own ln(2√N/δ): computed naively, δ = 5e-324 made it +inf, every posterior's bound
    # vacuous and the search settled on the prior
    log_term = float(bounds.log_term(n, delta))

    def f(emp: np.ndarray, kl: np.ndarray) -> np.ndarray:
        r = (np.maximum(kl, 0.0) + log_term) / (2.0 * n)
        return bounds.bound_from_r(bound, np.clip(emp, 0.0, 1.0), r)

    return f


def validate_choice(bound: str, delta: float) -> None:
    """A bound's name and δ, checked before a solver starts."""
    check_choice("bound", bound, BOUND_CHOICES)
    check_delta(delta)


def evaluate_posterior(p: np.ndarray, costs: np.ndarray, p0: np.ndarray, bound: str,
                       delta: float, solver: str, beta: float | None) -> Posterior:
    """Ĉ, KL and the bound value of a given posterior p on a cost matrix."""
    cbar, n, p0 = check_inputs(costs, p0)
    return posterior_at(p, cbar, n, p0, bound, delta, solver, beta)


def posterior_at(p: np.ndarray, cbar: np.ndarray, n: int, p0: np.ndarray, bound: str,
                 delta: float, solver: str, beta: float | None) -> Posterior:
    """The `Posterior` of p from the column means c̄ of N = `n` rows."""
    emp = float(np.clip(np.sum(cbar * p), 0.0, 1.0))  # fixed order, no BLAS
    kl = kl_divergence(p, p0)
    value = float(bounds.bound_value(bound, emp, kl, n, delta))
    return Posterior(p=p, emp_cost=emp, kl=kl, bound=bound, value=value, solver=solver, beta=beta)
