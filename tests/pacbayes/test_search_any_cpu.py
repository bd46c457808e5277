"""The posterior search returns the same β on every CPU (docs/reproducibility.md).

Oracle: the same search with NumPy's float64 exp/log/… moved one ulp in about half their
results (tests/other_libm.py, what an AVX-512 CPU's kernels do against the C library's). β must
come out bit for bit the same, and so p to the last bits; before the search made its decisions
with a tolerance, a flat bound's argmin wandered by 1e-7 under such noise, beyond the 1e-9 the
contract promises for every certificate number.
"""

from __future__ import annotations

import numpy as np
import pytest

import other_libm
from pacplan.pacbayes.posterior import optimize_gibbs


def _matrices(paper_dir=None) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(7)
    out = []
    for n, m, scale in ((500, 12, 0.3), (1000, 50, 0.1), (4000, 50, 0.5), (200, 3, 1.0)):
        means = rng.uniform(0.05, 0.6, m) * scale
        out.append((f"bernoulli {n}x{m}", (rng.random((n, m)) < means).astype(np.float64)))
    return out


def _both(costs: np.ndarray, delta: float, bound: str):
    here = optimize_gibbs(costs, delta, bound)
    with other_libm.active():
        other = optimize_gibbs(costs, delta, bound)
    return here, other


def _check(here, other) -> None:
    assert here.beta == other.beta
    np.testing.assert_allclose(other.p, here.p, rtol=1e-12, atol=1e-300)
    for field in ("emp_cost", "kl", "value"):
        a, b = getattr(here, field), getattr(other, field)
        assert abs(a - b) <= 1e-12 * max(1.0, abs(a)), field


@pytest.mark.parametrize("bound", ["best", "klinv", "quadratic", "mcallester"])
@pytest.mark.parametrize("delta", [0.01, 0.05])
def test_the_search_is_the_same_under_another_cpus_exp_and_log(bound: str, delta: float) -> None:
    for name, costs in _matrices():
        here, other = _both(costs, delta, bound)
        assert np.isfinite(here.value), name
        _check(here, other)


def test_the_papers_matrices_give_the_same_posterior_under_another_cpu(
        paper_cert: np.ndarray) -> None:
    for rows in (1000, 2000, 4000):
        _check(*_both(paper_cert[:rows], 0.01, "best"))
