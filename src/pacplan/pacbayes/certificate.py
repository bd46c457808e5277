"""The certificate: a JSON record of what was certified, from which inputs, and how to check it.

A certificate holds the three bounds for the chosen posterior p (all valid on one event of
probability ≥ 1 − δ, so the smallest is certified), δ, N, m, Ĉ, KL, p itself, the sha256 of the
input matrices and, when a test matrix is given, the test-set cost of p with a 99 % confidence
interval. `verify` recomputes all of it from the referenced files and fails loudly on any
mismatch, so a certificate cannot silently drift from its data.

The test-set interval is the Chernoff–kl interval {μ : n·kl(x̄‖μ) ≤ ln(2/α)}: valid for any
costs in [0, 1] (not only 0/1), and not degenerate when every test cost is 0.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacplan import __version__
from pacplan.errors import PacplanError
from pacplan.files import atomic_write_json
from pacplan.pacbayes import bounds
from pacplan.pacbayes.matrices import CostMatrix, load_cost_matrix
from pacplan.pacbayes.posterior import Posterior, evaluate_posterior, optimize, uniform_prior
from pacplan.validation import check_delta

TEST_CONFIDENCE = 0.99
_REL_TOL = 1e-9  # bounds recomputed at the stored p must agree to this (relative)
_POSTERIOR_TOL = 1e-6  # a re-solved posterior's bound must agree to this (absolute)


@dataclass
class MatrixRef:
    """Which file a matrix came from, its hash, and the rows used."""

    path: str
    sha256: str
    rows: int
    clipped: int = 0


@dataclass
class Certificate:
    """Everything needed to state, reproduce and check one PAC-Bayes certificate."""

    mcallester: float
    quadratic: float
    klinv: float
    certified: float
    certified_by: str
    emp_cost: float
    kl: float
    n: int
    m: int
    delta: float
    bound: str
    solver: str
    p: list[float]
    clip: bool
    cert_matrix: MatrixRef
    test_cost: float | None = None
    test_ci: list[float] | None = None
    test_confidence: float | None = None
    test_n: int | None = None
    test_matrix: MatrixRef | None = None
    beta: float | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    pacplan_version: str = __version__
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    # ------------------------------------------------------------------ (de)serialization
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.beta is not None and math.isinf(self.beta):
            d["beta"] = "inf"
        return d

    def save(self, path: str | Path) -> Path:
        """Write JSON atomically; matrix paths are stored relative to the certificate's folder."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        d = self.to_dict()
        for key in ("cert_matrix", "test_matrix"):
            if d[key] is not None:
                d[key]["path"] = relative_path(d[key]["path"], path.parent)
        atomic_write_json(path, d)
        return path

    @classmethod
    def load(cls, path: str | Path) -> Certificate:
        """Read a certificate; matrix paths are resolved against the certificate's folder."""
        path = Path(path)
        if not path.is_file():
            raise PacplanError(f"no such certificate file {path}")
        try:
            d = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise PacplanError(f"{path}: not valid JSON ({exc})") from exc
        try:
            for key in ("cert_matrix", "test_matrix"):
                if d.get(key) is not None:
                    ref = MatrixRef(**d[key])
                    ref.path = str((path.parent / ref.path).resolve())
                    d[key] = ref
            if d.get("beta") == "inf":
                d["beta"] = math.inf
            return cls(**d)
        except TypeError as exc:
            raise PacplanError(f"{path}: not a pacplan certificate ({exc})") from exc


def relative_path(target: str | Path, folder: Path) -> str:
    """`target` as seen from `folder` (a record that survives moving both together)."""
    try:
        return os.path.relpath(Path(target).resolve(), folder.resolve())
    except ValueError:  # another drive on Windows
        return str(Path(target).resolve())


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
        per_env = test.values @ post.p
        c.test_cost = float(per_env.mean())
        c.test_ci = list(confidence_interval(per_env))
        c.test_confidence = TEST_CONFIDENCE
        c.test_n = int(per_env.size)
        c.test_matrix = _ref(test)
    return c


def _ref(matrix: CostMatrix) -> MatrixRef:
    return MatrixRef(path=str(matrix.path) if matrix.path else "", sha256=matrix.sha256,
                     rows=matrix.rows, clipped=matrix.clipped)


def _close(a: float | None, b: float | None, tol: float) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def verify(path: str | Path) -> Certificate:
    """Recompute a saved certificate from its matrices; raise naming every mismatch."""
    stored = Certificate.load(path)
    problems: list[str] = []
    cert = _reload(stored.cert_matrix, stored.clip, "certification matrix", problems)
    test = None
    if stored.test_matrix is not None:
        test = _reload(stored.test_matrix, stored.clip, "test matrix", problems)
    if problems:
        raise PacplanError(f"{path}: " + "; ".join(problems))
    assert cert is not None
    p = np.asarray(stored.p, dtype=np.float64)
    if p.shape != (cert.values.shape[1],) or np.any(p < 0) or abs(p.sum() - 1.0) > 1e-9:
        raise PacplanError(f"{path}: stored posterior p is not a distribution over "
                           f"{cert.values.shape[1]} policies")
    # 1) the stored numbers must be exactly those of the stored p
    at_p = evaluate_posterior(p, cert.values, uniform_prior(p.size), stored.bound, stored.delta,
                   stored.solver, stored.beta)
    again = build_certificate(cert, stored.delta, stored.bound, stored.solver, test,
                              stored.provenance, posterior=at_p)
    for key in ("mcallester", "quadratic", "klinv", "certified", "emp_cost", "kl", "test_cost"):
        if not _close(getattr(stored, key), getattr(again, key), _REL_TOL):
            problems.append(f"{key} is {getattr(stored, key)} "
                            f"but recomputes to {getattr(again, key)}")
    for key in ("n", "m", "certified_by", "test_n"):
        if getattr(stored, key) != getattr(again, key):
            problems.append(f"{key} is {getattr(stored, key)} "
                            f"but recomputes to {getattr(again, key)}")
    if stored.test_ci is not None and again.test_ci is not None and not all(
        _close(a, b, _REL_TOL) for a, b in zip(stored.test_ci, again.test_ci)
    ):
        problems.append(f"test_ci is {stored.test_ci} but recomputes to {again.test_ci}")
    # 2) re-solving the posterior must not find a better bound than the one stored
    solver = stored.solver.split(":")[0]
    fresh = optimize(cert.values, stored.delta, bound=stored.bound, solver=solver)
    stored_value = float(bounds.bound_value(stored.bound, again.emp_cost, again.kl, again.n,
                                            stored.delta))
    if not _close(fresh.value, stored_value, _POSTERIOR_TOL) and fresh.value < stored_value:
        problems.append(f"posterior is not optimal: re-solving gives {stored.bound} bound "
                        f"{fresh.value:.9f}, stored p gives {stored_value:.9f}")
    if problems:
        raise PacplanError(f"{path}: " + "; ".join(problems))
    return stored


def _reload(ref: MatrixRef, clip: bool, label: str, problems: list[str]) -> CostMatrix | None:
    if not Path(ref.path).is_file():
        problems.append(f"{label} {ref.path} is missing")
        return None
    matrix = load_cost_matrix(ref.path, rows=ref.rows, clip=clip, name=label)
    if matrix.sha256 != ref.sha256:
        problems.append(f"{label} {ref.path} has changed (sha256 {matrix.sha256[:12]}… "
                        f"≠ recorded {ref.sha256[:12]}…)")
        return None
    return matrix
