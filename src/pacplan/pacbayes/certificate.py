"""Building a certificate: the bound-optimal posterior on a cost matrix, its three bounds (all
valid on one event of probability ≥ 1 − δ, so the smallest is certified) and, with a test
matrix, the test-set cost of p with a 99 % confidence interval.

The test-set interval is the Chernoff–kl interval {μ : n·kl(x̄‖μ) ≤ ln(2/α)}: valid for any
costs in [0, 1] (not only 0/1), and not degenerate when every test cost is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.pacbayes import bounds
from pacplan.pacbayes.matrices import CostMatrix
from pacplan.pacbayes.posterior import (
    Posterior,
    mixture_costs,
    optimize,
    optimize_gibbs_columns,
)
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
                      posterior: Posterior | None = None,
                      columns: Sequence[int] | None = None, m: int | None = None) -> Certificate:
    """Optimize the posterior on `cert` (unless one is given) and certify it.

    With `columns` (a screened certificate), `cert` and `test` hold only those columns of the
    m policies of a uniform prior: the posterior is the best one supported on them
    (`optimize_gibbs_columns`; a given `posterior` has one entry per column), and the
    certificate's p has m entries, zero off `columns`.
    """
    check_delta(delta)
    if test is not None and test.values.shape[1] != cert.values.shape[1]:
        raise PacplanError(
            f"test matrix has {test.values.shape[1]} policies (columns) but the certification "
            f"matrix has {cert.values.shape[1]}"
        )
    n, width = cert.values.shape
    if columns is None:
        m = width
        post = posterior or optimize(cert.values, delta, bound=bound, solver=solver)
        p = post.p
    else:
        columns = check_columns(columns, m, width)
        assert m is not None
        if solver.split(":")[0] != "gibbs":
            raise PacplanError(f"a screened certificate needs solver gibbs, not {solver}: the "
                               "paper's relative-entropy program optimizes over all m policies")
        post = posterior or optimize_gibbs_columns(cert.values, m, delta, bound=bound)
        p = np.zeros(m)
        p[columns] = post.p
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
        p=[float(v) for v in p],
        clip=bool(cert.clipped or (test is not None and test.clipped)),
        cert_matrix=_ref(cert),
        beta=post.beta,
        provenance=dict(provenance or {}),
        columns=None if columns is None else list(columns),
    )
    if test is not None:
        per_env = mixture_costs(test.values, post.p)
        c.test_cost = float(per_env.mean())
        c.test_ci = list(confidence_interval(per_env))
        c.test_confidence = TEST_CONFIDENCE
        c.test_n = int(per_env.size)
        c.test_matrix = _ref(test)
    return c


def check_columns(columns: Sequence[int], m: int | None, width: int) -> list[int]:
    """A screened certificate's columns: k distinct increasing indices below m, k = the
    matrices' width and k < m (all m columns is the plain certificate)."""
    cols = [int(c) for c in columns]
    if m is None or isinstance(m, bool) or not isinstance(m, int | np.integer):
        raise PacplanError("a screened certificate needs m, the number of policies its prior "
                           "drew, besides its columns")
    if len(cols) != width:
        raise PacplanError(f"columns lists {len(cols)} policies but the cost matrix has {width} "
                           "columns")
    if any(b <= a for a, b in pairwise(cols)) or (cols and (cols[0] < 0 or cols[-1] >= m)):
        raise PacplanError(f"columns must be distinct increasing indices in [0, {m}), got "
                           f"{cols[:8]}{' …' if len(cols) > 8 else ''}")
    if len(cols) >= m:
        raise PacplanError(f"columns lists all {m} policies: leave it out (a plain certificate)")
    return cols


def _ref(matrix: CostMatrix) -> MatrixRef:
    return MatrixRef(path=str(matrix.path) if matrix.path else "", sha256=matrix.sha256,
                     rows=matrix.rows, clipped=matrix.clipped)
