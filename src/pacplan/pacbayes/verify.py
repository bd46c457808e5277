"""`verify`: a saved certificate is trusted only as far as it is checked.

Types and finiteness come from the strict schema; fields must agree with each other; the
referenced matrices must have their recorded sha256; every number is recomputed from them at
the stored p; the posterior is re-solved with the stored solver; the content hash is checked
last. A `ProvenanceCheck` (the run directory's, `pacplan.pipeline.provenance`) adds what only the
certificate's surroundings can vouch for. Every problem is one line naming the field.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.files import read_file_bytes, sha256_bytes
from pacplan.pacbayes.certificate import TEST_CONFIDENCE, build_certificate, check_columns
from pacplan.pacbayes.evaluate import posterior_at
from pacplan.pacbayes.matrices import CostMatrix, matrix_from_bytes
from pacplan.pacbayes.posterior import (
    Posterior,
    column_means,
    column_prior,
    evaluate_posterior,
    optimize,
    optimize_gibbs_columns,
    uniform_prior,
)
from pacplan.pacbayes.record import Certificate, Loaded, MatrixRef, load_record
from pacplan.pacbayes.schema import ProvenanceRecord, check_content_hash
from pacplan.validation import check_unit_costs, overlapping_ranges

_REL_TOL = 1e-9  # bounds recomputed at the stored p must agree to this (relative)
_POSTERIOR_TOL = 1e-6  # a re-solved posterior's bound must agree to this (absolute)
_P_TOL = 1e-9  # p against p_β entry by entry, and |Σp − 1|


def _close(a: float | None, b: float | None, tol: float) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


class ProvenanceCheck(Protocol):
    """Checks a certificate's provenance against where it lives (e.g. its run directory).

    `vouches(path)`: whether this check applies to the certificate at `path`, and so can stand
    in for a missing content hash; `problems(path, loaded)`: what disagrees, as phrases;
    `unchecked(path, loaded)`: what the certificate rests on that could not be re-checked
    (a file not found, an object no file holds), as phrases.
    """

    def vouches(self, path: Path) -> bool: ...

    def problems(self, path: Path, loaded: Loaded) -> list[str]: ...

    def unchecked(self, path: Path, loaded: Loaded) -> list[str]: ...


def folder_holding(path: Path, marker: str) -> Path | None:
    """The folder a certificate at `path` belongs to, <dir>/ or <dir>/certificates/, told by
    the file `marker` in it (a run directory's manifest, a certify-policy folder's mark):
    where a `ProvenanceCheck` looks. None when neither holds it (or `path` cannot be resolved:
    a symlink loop)."""
    try:
        folder = path.resolve().parent
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop
        return None
    for candidate in (folder, folder.parent if folder.name == "certificates" else None):
        if candidate is not None and (candidate / marker).is_file():
            return candidate
    return None


@dataclass(frozen=True)
class Verified:
    """A certificate that verified, and what it rests on that could not be checked."""

    certificate: Certificate
    unchecked: tuple[str, ...] = ()


def verify(path: str | Path, provenance: ProvenanceCheck | None = None) -> Certificate:
    """Check every field of a saved certificate: types, content hash, provenance (with
    `provenance`, against where it lives), and every number recomputed from the sha256-checked
    matrices. Raises one line naming what differs."""
    return verify_in_full(path, provenance).certificate


def verify_in_full(path: str | Path, provenance: ProvenanceCheck | None = None) -> Verified:
    """`verify`, also returning what it could not check (so nothing unchecked is called OK)."""
    try:
        return _verify(Path(path), provenance)
    except PacplanError as exc:  # a path or value from the file may hold a line break
        raise PacplanError(_one_line(str(exc))) from None


def _one_line(text: str) -> str:
    """Control characters (line breaks above all) shown escaped, so an error stays one line."""
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch).startswith("C") else ch
                   for ch in text)


def _verify(path: Path, provenance: ProvenanceCheck | None) -> Verified:
    loaded = load_record(path, check_hash=False)  # checked last: a recomputed field is named first
    c, where = loaded.certificate, str(path)
    context = provenance if provenance is not None and provenance.vouches(path) else None
    _check_hash_coverage(loaded, context is not None, where)
    _raise_if(where, _check_fields(c))
    if loaded.provenance is not None:
        _raise_if(where, _check_seeds(c, loaded.provenance))
    if context is not None:
        try:
            problems = context.problems(path, loaded)
        except PacplanError as exc:
            raise PacplanError(f"{where}: {exc}") from None
        _raise_if(where, problems)
    width = c.m if c.columns is None else len(c.columns)
    cert = _reload(c.cert_matrix, "cert_matrix", "certification matrix", width, where)
    test = None
    if c.test_matrix is not None:
        test = _reload(c.test_matrix, "test_matrix", "test matrix", width, where)
    _raise_if(where, _check_posterior(c, cert.values))
    p = np.asarray(c.p, dtype=np.float64)
    if c.columns is None:
        at_p = evaluate_posterior(p, cert.values, uniform_prior(c.m), c.bound, c.delta, c.solver,
                                  c.beta)
    else:  # the posterior on the computed columns, KL against the uniform prior over all m
        at_p = posterior_at(p[c.columns], column_means(cert.values), c.n,
                            column_prior(c.m, width), c.bound, c.delta, c.solver, c.beta)
    _raise_if(where, _recompute(c, cert, test, at_p) + _resolve(c, cert, at_p))
    check_content_hash(loaded.record, where)
    unchecked = () if context is None else tuple(_one_line(u) for u in
                                                 context.unchecked(path, loaded))
    return Verified(c, unchecked)


def _raise_if(where: str, problems: list[str]) -> None:
    if problems:
        raise PacplanError(f"{where}: " + "; ".join(problems))


def _check_hash_coverage(loaded: Loaded, vouched: bool, where: str) -> None:
    """Without content_sha256, only a run's own manifest can vouch for the provenance."""
    if loaded.record.content_sha256 is not None:
        return
    if not vouched or loaded.provenance is None:
        raise PacplanError(
            f"{where}: field content_sha256 is missing; only certificates written before it "
            "existed may lack it, and only inside their run directory, whose manifest.json "
            "then vouches for the provenance")


def _check_fields(c: Certificate) -> list[str]:
    """Fields that must agree with each other before anything is recomputed."""
    problems = []
    tests = {k: getattr(c, k) for k in ("test_cost", "test_ci", "test_confidence", "test_n",
                                         "test_matrix")}
    given = [k for k, v in tests.items() if v is not None]
    if given and len(given) < len(tests):
        missing = next(k for k in tests if k not in given)
        problems.append(f"{missing} is null but {given[0]} is given: the test fields "
                        f"({', '.join(tests)}) are all given or all null")
    if c.test_confidence is not None and c.test_confidence != TEST_CONFIDENCE:
        problems.append(f"test_confidence is {c.test_confidence!r} but pacplan's test "
                        f"intervals are at confidence {TEST_CONFIDENCE} (and printed so)")
    if c.n != c.cert_matrix.rows:
        problems.append(f"n is {c.n} but cert_matrix.rows is {c.cert_matrix.rows}: "
                        "n counts the certification rows used")
    if c.test_matrix is not None and c.test_n is not None and c.test_n != c.test_matrix.rows:
        problems.append(f"test_n is {c.test_n} but test_matrix.rows is {c.test_matrix.rows}")
    if len(c.p) != c.m:
        problems.append(f"p has {len(c.p)} entries but m is {c.m}")
    elif c.columns is not None:
        problems += _check_columns(c)
    if c.solver == "gibbs" and c.beta is None:
        problems.append("beta is null but a gibbs posterior is p_β for a recorded beta")
    if c.solver != "gibbs" and c.beta is not None:
        problems.append(f"beta is {c.beta!r} but solver {c.solver} records none (only gibbs "
                        "has a beta; a rep certificate has beta null)")
    return problems


def _check_columns(c: Certificate) -> list[str]:
    """A screened certificate: well-formed columns, gibbs, and p zero off them."""
    assert c.columns is not None
    try:
        check_columns(c.columns, c.m, len(c.columns))
    except PacplanError as exc:
        return [str(exc)]
    problems = []
    if c.solver != "gibbs":
        problems.append(f"solver is {c.solver} but a screened certificate (columns) is solved "
                        "by gibbs")
    off = np.delete(np.asarray(c.p, dtype=np.float64), c.columns)
    if np.any(off != 0.0):
        problems.append(f"p puts {float(off.sum())!r} on policies outside columns: a screened "
                        "posterior lives on its columns only (their costs are all that was "
                        "computed)")
    return problems


def _check_seeds(c: Certificate, prov: ProvenanceRecord) -> list[str]:
    """Seed ranges: well formed, disjoint (the bound needs S independent of the prior and of
    the test set), and as long as the rows they name."""
    ranges = {"prior": prov.seeds.prior, "cert": prov.seeds.cert, "test": prov.seeds.test}
    problems = [f"provenance.seeds.{role} is {r}: a range [start, stop) needs start < stop"
                for role, r in ranges.items() if r[1] <= r[0]]
    for a, b in overlapping_ranges(ranges):
        problems.append(f"provenance.seeds.{a} {ranges[a]} and provenance.seeds.{b} "
                        f"{ranges[b]} overlap: the bound needs disjoint seed ranges")
    size = prov.seeds.cert[1] - prov.seeds.cert[0]
    if size != c.n:
        problems.append(f"provenance.seeds.cert {prov.seeds.cert} holds {size} seeds but n is "
                        f"{c.n}")
    size = prov.seeds.test[1] - prov.seeds.test[0]
    if c.test_n is not None and size != c.test_n:
        problems.append(f"provenance.seeds.test {prov.seeds.test} holds {size} seeds but test_n "
                        f"is {c.test_n}")
    return problems


def _reload(ref: MatrixRef, key: str, label: str, m: int, where: str) -> CostMatrix:
    """A referenced matrix: sha256 checked first, then its first `rows` rows read and
    checked, with out-of-range entries clipped and counted (compared with `clipped` later)."""
    path = Path(ref.path)
    if not path.is_file():
        raise PacplanError(f"{where}: {label} {path} is missing ({key}.path)")
    data = read_file_bytes(path, f"{label} {path}")  # hashed and parsed: the same bytes
    digest = sha256_bytes(data)
    if digest != ref.sha256:
        raise PacplanError(f"{where}: {label} {path} has changed (sha256 {digest[:12]}… ≠ "
                           f"recorded {key}.sha256 {ref.sha256[:12]}…)")
    raw = matrix_from_bytes(data, f"{label} {path}")  # .npy or rational
    if raw.ndim == 2 and ref.rows > raw.shape[0]:
        raise PacplanError(f"{where}: {key}.rows is {ref.rows} but {label} {path} has "
                           f"{raw.shape[0]} rows")
    values, clipped = check_unit_costs(raw[: ref.rows], f"{label} {path}", clip=True)
    if values.shape[1] != m:
        raise PacplanError(f"{where}: m (or the number of columns listed) is {m} but {label} "
                           f"{path} has {values.shape[1]} columns (policies)")
    return CostMatrix(values=values, path=path, sha256=digest, rows=ref.rows, clipped=clipped)


def _gibbs_posterior(cbar: np.ndarray, beta: float) -> np.ndarray:
    """p_β ∝ exp(−β c̄) under the uniform prior, recomputed independently of the solver."""
    shift = cbar - cbar.min()
    w = (shift == 0.0).astype(np.float64) if math.isinf(beta) else np.exp(-beta * shift)
    return w / w.sum()


def _check_posterior(c: Certificate, costs: np.ndarray) -> list[str]:
    """p is a distribution and, for gibbs, exactly p_β of the stored beta."""
    p = np.asarray(c.p, dtype=np.float64)
    if abs(p.sum() - 1.0) > _P_TOL:
        return [f"p sums to {p.sum()!r}, not 1: not a distribution over the {c.m} policies"]
    if c.solver != "gibbs" or c.beta is None:
        return []
    expected = _gibbs_posterior(column_means(costs), c.beta)
    if c.columns is not None:  # p_β on the columns (equal prior mass cancels), zero off them
        expected, on_columns = np.zeros(c.m), expected
        expected[c.columns] = on_columns
    i = int(np.argmax(np.abs(p - expected)))
    if abs(p[i] - expected[i]) > _P_TOL:
        return [f"p and beta disagree: p is not the Gibbs posterior of beta = {c.beta!r} on "
                f"the certification matrix (p[{i}] is {float(p[i])!r} but beta gives "
                f"{float(expected[i])!r})"]
    return []


def _recompute(c: Certificate, cert: CostMatrix, test: CostMatrix | None,
               at_p: Posterior) -> list[str]:
    """Every number of the certificate, recomputed at the stored p from the matrices."""
    again = build_certificate(cert, c.delta, c.bound, c.solver, test, c.provenance,
                              posterior=at_p, columns=c.columns, m=c.m)
    problems = []
    for key in ("mcallester", "quadratic", "klinv", "certified", "emp_cost", "kl", "test_cost"):
        if not _close(getattr(c, key), getattr(again, key), _REL_TOL):
            problems.append(f"{key} is {getattr(c, key)!r} but recomputes to "
                            f"{getattr(again, key)!r} from the matrices")
    if c.certified_by != again.certified_by:
        problems.append(f"certified_by is {c.certified_by} but the smallest bound is "
                        f"{again.certified_by}")
    if c.test_ci is not None and again.test_ci is not None and not all(
            _close(a, b, _REL_TOL) for a, b in zip(c.test_ci, again.test_ci)):
        problems.append(f"test_ci is {c.test_ci} but recomputes to {again.test_ci}")
    for key in ("cert_matrix", "test_matrix"):
        ref, fresh = getattr(c, key), getattr(again, key)
        if ref is not None and fresh is not None and ref.clipped != fresh.clipped:
            problems.append(f"{key}.clipped is {ref.clipped} but the rows used hold "
                            f"{fresh.clipped} entries outside [0, 1]")
    if c.clip != again.clip:
        problems.append(f"clip is {str(c.clip).lower()} but "
                        + ("entries were clipped" if again.clip else "no entry lies outside "
                           "[0, 1]") + " (clip records whether any entry was clipped)")
    return problems


def _resolve(c: Certificate, cert: CostMatrix, at_p: Posterior) -> list[str]:
    """Re-solving with the stored solver and bound must give the stored p's bound."""
    if c.columns is None:
        fresh = optimize(cert.values, c.delta, bound=c.bound, solver=c.solver.split(":")[0])
    else:
        fresh = optimize_gibbs_columns(cert.values, c.m, c.delta, bound=c.bound)
    if fresh.value < at_p.value - _POSTERIOR_TOL:
        return [f"posterior is not optimal: re-solving with {c.solver} gives {c.bound} bound "
                f"{fresh.value:.9f}, stored p gives {at_p.value:.9f}"]
    if fresh.value > at_p.value + _POSTERIOR_TOL:
        return [f"solver {c.solver} does not reproduce p: re-solving gives {c.bound} bound "
                f"{fresh.value:.9f}, stored p gives {at_p.value:.9f}"]
    return []
