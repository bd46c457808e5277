"""Building a certificate: the bound-optimal posterior on a cost matrix, its three bounds (all
valid on one event of probability ≥ 1 − δ, so the smallest is certified) and, with a test
matrix, the test-set cost of p with a 99 % confidence interval.

The test-set interval is the Chernoff–kl interval {μ : n·kl(x̄‖μ) ≤ ln(2/α)}: valid for any
costs in [0, 1] (not only 0/1), and not degenerate when every test cost is 0.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.pacbayes import bounds
from pacplan.pacbayes.matrices import CostMatrix
from pacplan.pacbayes.posterior import Posterior, mixture_costs, optimize
from pacplan.pacbayes.record import Certificate, MatrixRef
from pacplan.validation import check_delta

TEST_CONFIDENCE = 0.99


def confidence_interval(costs: np.ndarray,
                        confidence: float = TEST_CONFIDENCE) -> tuple[float, float]:
    """Two-sided Chernoff–kl confidence interval for the mean of i.i.d. costs in [0, 1]."""
    x = np.asarray(costs, dtype=np.float64)
    mean = float(np.clip(x.mean(), 0.0, 1.0))
    budget = math.log(2.0 / (1.0 - confidence)) / x.size
    return float(bounds.kl_inverse_lower(mean, budget)), float(bounds.kl_inverse(mean, budget))


def build_certificate(cert: CostMatrix, delta: float, bound: str = "best", solver: str = "gibbs",
                      test: CostMatrix | None = None, provenance: dict[str, Any] | None = None,
                      posterior: Posterior | None = None) -> Certificate:
    """Optimize the posterior on `cert` (unless one is given) and certify it."""
    check_delta(delta)
    if test is not None and test.values.shape[1] != cert.values.shape[1]:
        raise PacplanError(
            f"test matrix has {test.values.shape[1]} policies (columns) but the certification "
            f"matrix has {cert.values.shape[1]}"
        )
    post = posterior or optimize(cert.values, delta, bound=bound, solver=solver)
    n, m = cert.values.shape
    values = bounds.all_bounds(post.emp_cost, post.kl, n, delta)
    certified_by = min(values, key=values.get)
    c = Certificate(
        **values,
        certified=values[certified_by],
        certified_by=certified_by,
        emp_cost=post.emp_cost,
        kl=post.kl,
        n=n,
        m=m,
        delta=float(delta),
        bound=bound,
        solver=post.solver,
        p=[float(v) for v in post.p],
        clip=bool(cert.clipped or (test is not None and test.clipped)),
        cert_matrix=_ref(cert),
        beta=post.beta,
        provenance=dict(provenance or {}),
    )
    if test is not None:
        per_env = mixture_costs(test.values, post.p)
        c.test_cost = float(per_env.mean())
        c.test_ci = list(confidence_interval(per_env))
        c.test_confidence = TEST_CONFIDENCE
        c.test_n = int(per_env.size)
        c.test_matrix = _ref(test)
    return c


def _ref(matrix: CostMatrix) -> MatrixRef:
    return MatrixRef(path=str(matrix.path) if matrix.path else "", sha256=matrix.sha256,
                     rows=matrix.rows, clipped=matrix.clipped)
