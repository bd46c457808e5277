"""Validity by simulation: on environment distributions whose true costs are known exactly,
the certified bound (δ = 0.01) must hold in at least 99 % of independent draws of S."""

from __future__ import annotations

import numpy as np
import pytest

from pacplan.pacbayes import posterior

DELTA = 0.01
DRAWS = 500


def _shared_difficulty(rng: np.random.Generator, n: int, true_means: np.ndarray) -> np.ndarray:
    """0/1 costs correlated across policies: environment i fails policy j iff u_i < μ_j."""
    u = rng.random((n, 1))
    return (u < true_means[None, :]).astype(float)


def _beta_costs(rng: np.random.Generator, n: int, true_means: np.ndarray) -> np.ndarray:
    """Continuous costs in [0, 1]: Beta(4μ, 4(1−μ)) has mean exactly μ."""
    mu = true_means[None, :]
    return rng.beta(4 * mu, 4 * (1 - mu), size=(n, true_means.size))


def _tight_near_zero(rng: np.random.Generator, n: int, true_means: np.ndarray) -> np.ndarray:
    """Rare failures, where kl-inverse bounds are tightest relative to the truth."""
    return (rng.random((n, true_means.size)) < true_means[None, :]).astype(float)


@pytest.mark.parametrize(
    ("sampler", "n", "true_means"),
    [
        (_shared_difficulty, 100, np.linspace(0.1, 0.6, 20)),
        (_beta_costs, 200, np.linspace(0.05, 0.5, 10)),
        (_tight_near_zero, 300, np.array([0.01, 0.02, 0.03])),
    ],
)
def test_certified_bound_holds_in_99_percent_of_draws(sampler, n, true_means):
    rng = np.random.default_rng(12345)
    violations = naive_violations = 0
    for _ in range(DRAWS):
        costs = sampler(rng, n, true_means)
        post = posterior.optimize_gibbs(costs, DELTA, "best")
        true_cost = float(post.p @ true_means)
        violations += post.value < true_cost
        naive_violations += post.emp_cost < true_cost
    assert violations <= DRAWS * DELTA, f"{violations} of {DRAWS} certificates were wrong"
    # the simulation has teeth: the uncertified empirical cost is often below the truth
    assert naive_violations >= DRAWS // 5
