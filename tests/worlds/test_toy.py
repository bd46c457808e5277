"""The toy world: range, determinism, batch invariance, its closed-form oracle vs Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds import World, make_world
from pacplan.worlds.toy import ToyWorld


def test_registry_builds_toy_and_it_satisfies_the_protocol() -> None:
    w = make_world("toy", dim=5)
    assert isinstance(w, World)
    assert w.name == "toy"
    assert w.policy_dim() == 5


def test_costs_shape_range_and_determinism() -> None:
    w = ToyWorld(dim=6)
    rng = np.random.default_rng(1)
    thetas = (3 * rng.standard_normal((11, 6))).astype(np.float32)
    seeds = np.arange(100, 107, dtype=np.int64)
    c = w.costs(thetas, seeds)
    assert c.shape == (7, 11) and c.dtype == np.float64
    assert np.all((c >= 0) & (c <= 1))
    assert np.array_equal(c, ToyWorld(dim=6).costs(thetas, seeds))
    # Different seeds really are different environments.
    assert not np.array_equal(c[0], c[1])


def test_cost_formula_against_an_independent_computation() -> None:
    w = ToyWorld(dim=4, shift=0.5, scale=3.0)
    theta = np.array([[0.3, -0.2, 1.0, 0.0]], dtype=np.float32)
    for seed in (0, 7, 12345):
        goal = np.array([-1.0, -1 / 3, 1 / 3, 1.0]) + 0.5 * np.random.default_rng(
            seed
        ).standard_normal(4)
        expected = 1.0 - np.exp(-np.sum((theta[0].astype(np.float64) - goal) ** 2) / 3.0)
        assert w.costs(theta, np.array([seed]))[0, 0] == pytest.approx(expected, rel=1e-12)


def test_zero_cost_at_the_goal_of_each_seed() -> None:
    w = ToyWorld(dim=8)
    for seed in (3, 4):
        goal = w.goal(seed).astype(np.float32)[None]
        assert w.costs(goal, np.array([seed]))[0, 0] < 1e-12


def test_batch_invariance_is_bitwise() -> None:
    """A (theta, seed) cost never depends on the rest of the batch: chunking is free."""
    w = ToyWorld(dim=9)
    rng = np.random.default_rng(2)
    thetas = rng.standard_normal((20, 9)).astype(np.float32)
    seeds = np.arange(30, dtype=np.int64)
    full = w.costs(thetas, seeds)
    assert np.array_equal(w.costs(thetas[5:6], seeds[7:8]), full[7:8, 5:6])
    assert np.array_equal(w.costs(thetas[::3], seeds[10:20]), full[10:20, ::3])


def test_work_option_burns_cpu_without_changing_costs() -> None:
    thetas = np.zeros((3, 4), dtype=np.float32)
    seeds = np.arange(3)
    assert np.array_equal(ToyWorld(dim=4, work=50).costs(thetas, seeds),
                          ToyWorld(dim=4).costs(thetas, seeds))


def test_expected_cost_oracle_matches_monte_carlo() -> None:
    """The closed form used as the ES oracle agrees with brute-force sampling (4 s.e.)."""
    w = ToyWorld(dim=3, shift=0.4, scale=2.0)
    mu = np.array([0.5, -0.5, 0.2])
    var = np.array([0.3, 0.1, 0.5])
    rng = np.random.default_rng(3)
    thetas = (mu + np.sqrt(var) * rng.standard_normal((400, 3))).astype(np.float32)
    seeds = np.arange(1000, 1400)
    c = w.costs(thetas, seeds).mean(axis=0)  # each theta averaged over 400 environments
    est, se = c.mean(), c.std(ddof=1) / np.sqrt(c.size)
    assert abs(est - w.expected_cost(mu, var)) < 4 * se + 2e-3


def test_the_target_minimizes_expected_cost() -> None:
    w = ToyWorld(dim=5)
    best = w.min_expected_cost()
    assert best == pytest.approx(w.expected_cost(w.optimum(), 0.0))
    rng = np.random.default_rng(4)
    for _ in range(20):
        assert w.expected_cost(w.optimum() + 0.1 * rng.standard_normal(5), 0.0) > best
    assert w.expected_cost(w.optimum(), 0.2) > best


@pytest.mark.parametrize(
    "options", [{"dim": 0}, {"dim": 3, "shift": -1}, {"dim": 3, "work": -2},
                {"dim": 3, "target": [1.0, 2.0]}, {"dim": 3, "scale": 0.0}]
)
def test_bad_options_are_user_errors(options: dict) -> None:
    with pytest.raises(PacplanError):
        make_world("toy", **options)


def test_wrong_theta_width_is_a_user_error() -> None:
    with pytest.raises(PacplanError, match="thetas must be"):
        ToyWorld(dim=3).costs(np.zeros((2, 4), np.float32), np.arange(2))
