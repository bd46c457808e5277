"""The certificate: a JSON record of what was certified, from which inputs, and how to check it.

A certificate holds the three bounds for the chosen posterior p (all valid on one event of
probability ≥ 1 − δ, so the smallest is certified), δ, N, m, Ĉ, KL, p itself, the sha256 of the
input matrices and, when a test matrix is given, the test-set cost of p with a 99 % confidence
interval. `verify` trusts nothing it did not check: every number is recomputed from the
sha256-checked matrices, every field has a strict JSON type (one-line error otherwise), and what
cannot be recomputed (provenance, timestamp, version) is covered by the certificate's own
content hash and, in a run directory, checked against manifest.json and the files.

The content hash only catches accidental edits: anyone can recompute it. The guarantee against
a deliberate edit is the recomputation from the hash-checked matrices.

The test-set interval is the Chernoff–kl interval {μ : n·kl(x̄‖μ) ≤ ln(2/α)}: valid for any
costs in [0, 1] (not only 0/1), and not degenerate when every test cost is 0.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pacplan import __version__
from pacplan.choices import BOUND_CHOICES, BOUNDS
from pacplan.errors import PacplanError
from pacplan.files import atomic_write_json, load_npy, sha256_file
from pacplan.pacbayes import bounds
from pacplan.pacbayes.matrices import CostMatrix
from pacplan.pacbayes.posterior import (
    Posterior,
    column_means,
    evaluate_posterior,
    optimize,
    uniform_prior,
)
from pacplan.validation import check_delta, check_unit_costs

TEST_CONFIDENCE = 0.99
SOLVER_NAMES = ("gibbs", "rep:clarabel", "rep:mosek")
"""What a certificate's `solver` may say: the solver and, for rep, its conic backend."""
_REL_TOL = 1e-9  # bounds recomputed at the stored p must agree to this (relative)
_POSTERIOR_TOL = 1e-6  # a re-solved posterior's bound must agree to this (absolute)
_P_TOL = 1e-9  # p against p_β entry by entry, and |Σp − 1|
_MAX_BYTES = 256 * 2**20  # a certificate of 10⁶ policies is ~25 MB


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
    content_sha256: str | None = None  # set when saved or loaded; None for one never saved

    # ------------------------------------------------------------------ (de)serialization
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.beta is not None and math.isinf(self.beta):
            d["beta"] = "inf"
        return d

    def save(self, path: str | Path) -> Path:
        """Write JSON atomically, with matrix paths relative to the certificate's folder and
        the sha256 of the content; what `verify` would refuse is never written."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        d = self.to_dict()
        del d["content_sha256"]
        for key in ("cert_matrix", "test_matrix"):
            if d[key] is not None:
                d[key]["path"] = relative_path(d[key]["path"], path.parent)
        try:  # plain JSON types (no numpy scalars), and never a non-finite number
            d = json.loads(json.dumps(d, allow_nan=False))
        except ValueError:
            raise PacplanError(f"{path}: refusing to write a certificate holding a non-finite "
                               "number") from None
        d["content_sha256"] = certificate_content_sha256(d, source=str(path))
        atomic_write_json(path, d)
        self.content_sha256 = d["content_sha256"]
        return path

    @classmethod
    def load(cls, path: str | Path) -> Certificate:
        """Read a certificate (strict JSON types, content hash checked when present); matrix
        paths are resolved against the certificate's folder. Numbers are not recomputed: that
        is `verify`."""
        return _load(Path(path)).certificate


def relative_path(target: str | Path, folder: Path) -> str:
    """`target` as seen from `folder` (a record that survives moving both together)."""
    try:
        return os.path.relpath(Path(target).resolve(), folder.resolve())
    except ValueError:  # another drive on Windows
        return str(Path(target).resolve())


# ====================================================================== the JSON schema

_Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
_Unit = Annotated[float, Field(ge=0.0, le=1.0)]
_Seeds = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=2, max_length=2)]
_SHA_RULE = "a sha256 (64 lowercase hex digits)"
_SEEDS_RULE = "a seed range [start, stop] of two integers ≥ 0"
_ITEM_RULES = {"p": "a number in [0, 1]", "test_ci": "a number in [0, 1]",
               "prior": "an integer ≥ 0", "cert": "an integer ≥ 0", "test": "an integer ≥ 0"}


class _Record(BaseModel):
    """Strict JSON: no coercion (\"0.5\" is not a number, true is not 1), no unknown fields,
    no NaN or infinity."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False, frozen=True)


class MatrixRecord(_Record):
    path: str = Field(min_length=1, description="a file path (a non-empty string)")
    sha256: _Sha256 = Field(description=_SHA_RULE)
    rows: int = Field(ge=1, description="an integer ≥ 1")
    clipped: int = Field(ge=0, description="an integer ≥ 0")


class WorldRecord(_Record):
    name: str = Field(description="a world name (a string)")
    options: dict[str, Any] = Field(description="an object of world options")


class SeedsRecord(_Record):
    prior: _Seeds = Field(description=_SEEDS_RULE)
    cert: _Seeds = Field(description=_SEEDS_RULE)
    test: _Seeds = Field(description=_SEEDS_RULE)


class ProvenanceRecord(_Record):
    """Where a run's certificate came from: not recomputable from the matrices, so hashed
    (content_sha256) and, in a run directory, checked against manifest.json."""

    world: WorldRecord = Field(description="an object {name, options}")
    seeds: SeedsRecord = Field(description="an object {prior, cert, test}")
    prior_sha256: _Sha256 | None = Field(description=f"{_SHA_RULE} or null")
    policies_sha256: _Sha256 | None = Field(description=f"{_SHA_RULE} or null")


class CertificateRecord(_Record):
    """The certificate file, field by field (see README, "What verify checks")."""

    mcallester: float = Field(ge=0.0, description="a number ≥ 0")  # may exceed 1
    quadratic: float = Field(ge=0.0, description="a number ≥ 0")  # may exceed 1
    klinv: _Unit = Field(description="a number in [0, 1]")
    certified: _Unit = Field(description="a number in [0, 1]")
    certified_by: Literal[BOUNDS] = Field(description=f"one of {', '.join(BOUNDS)}")
    emp_cost: _Unit = Field(description="a number in [0, 1]")
    kl: float = Field(ge=0.0, description="a number ≥ 0")
    n: int = Field(ge=1, description="an integer ≥ 1")
    m: int = Field(ge=1, description="an integer ≥ 1")
    delta: float = Field(gt=0.0, lt=1.0, description="a number in (0, 1)")
    bound: Literal[BOUND_CHOICES] = Field(description=f"one of {', '.join(BOUND_CHOICES)}")
    solver: Literal[SOLVER_NAMES] = Field(description=f"one of {', '.join(SOLVER_NAMES)}")
    p: list[_Unit] = Field(min_length=1, description="a list of m numbers in [0, 1]")
    clip: bool = Field(description="true or false")
    cert_matrix: MatrixRecord = Field(description="an object {path, sha256, rows, clipped}")
    test_cost: _Unit | None = Field(description="a number in [0, 1] or null")
    test_ci: Annotated[list[_Unit], Field(min_length=2, max_length=2)] | None = Field(
        description="a list [lower, upper] of two numbers in [0, 1], or null")
    test_confidence: Annotated[float, Field(gt=0.0, lt=1.0)] | None = Field(
        description="a number in (0, 1) or null")
    test_n: Annotated[int, Field(ge=1)] | None = Field(description="an integer ≥ 1 or null")
    test_matrix: MatrixRecord | None = Field(
        description="an object {path, sha256, rows, clipped} or null")
    beta: Annotated[float, Field(ge=0.0)] | Literal["inf"] | None = Field(
        description='a number ≥ 0, the string "inf", or null')
    provenance: dict[str, Any] = Field(
        description="an object: {} or {world, seeds, prior_sha256, policies_sha256}")
    pacplan_version: str = Field(min_length=1, description="a version string")
    created: str = Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$",
                         description='a string "YYYY-MM-DDThh:mm:ssZ" (UTC)')
    content_sha256: _Sha256 = Field(default=None, description=_SHA_RULE)  # type: ignore[assignment]


def certificate_content_sha256(data: dict[str, Any], source: str = "certificate") -> str:
    """sha256 of a certificate's canonical content: every field but `content_sha256`, as
    validated (1 and 1.0 are the same number), sorted keys, no whitespace."""
    return _content_hash(_validate(data, source)[0])


def _content_hash(record: CertificateRecord) -> str:
    content = record.model_dump(mode="json", exclude={"content_sha256"})
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _validate(data: Any, source: str) -> tuple[CertificateRecord, ProvenanceRecord | None]:
    """The certificate and its provenance as strict records, or one line naming the field."""
    if not isinstance(data, dict):
        raise PacplanError(f"{source}: not a pacplan certificate (a JSON object); found "
                           f"{_show(data)}")
    try:
        record = CertificateRecord.model_validate(data)
    except ValidationError as exc:
        raise PacplanError(f"{source}: {_schema_problem(exc, CertificateRecord, ())}") from None
    if not record.provenance:
        return record, None
    try:
        return record, ProvenanceRecord.model_validate(record.provenance)
    except ValidationError as exc:
        problem = _schema_problem(exc, ProvenanceRecord, ("provenance",))
        raise PacplanError(f"{source}: {problem}") from None


def _schema_problem(exc: ValidationError, model: type[BaseModel], prefix: tuple) -> str:
    """The first validation error as 'field X is <found> but must be <rule>'."""
    err = exc.errors()[0]
    name, rule = _field_rule(model, tuple(err["loc"]))
    name = ".".join(prefix) + ("." if prefix and not name.startswith("[") else "") + name
    if err["type"] == "missing":
        return f"field {name} is missing; it must be {rule}"
    if err["type"] == "extra_forbidden":
        return f"unknown field {name}: a pacplan certificate has no such field"
    return f"field {name} is {_show(err['input'])} but must be {rule}"


def _field_rule(model: type[BaseModel] | None, loc: tuple) -> tuple[str, str]:
    """Dotted field name (list indices as [i]) and the rule of the innermost known field.

    Below a leaf field, string parts of `loc` name union members ('float', …): skipped.
    Below a record, a string that is not one of its fields is an unknown (extra) field.
    """
    name, rule, last = "", "a valid value", ""
    for part in loc:
        if isinstance(part, int):
            name += f"[{part}]"
            rule = _ITEM_RULES.get(last, rule)
        elif model is not None and part in model.model_fields:
            info = model.model_fields[part]
            name += ("." if name else "") + part
            rule, last = info.description or rule, part
            model = next((a for a in (info.annotation, *get_args(info.annotation))
                          if isinstance(a, type) and issubclass(a, BaseModel)), None)
        elif model is not None:
            name += ("." if name else "") + str(part)
    return name, rule


_SAFE_TEXT = re.compile(r"[\w.:+\- ]{0,40}")


def _show(value: Any) -> str:
    """A found JSON value for a message: its type, and the value where short and plain."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, int):
        return f"the integer {value}" if abs(value) < 10**30 else "a huge integer"
    if isinstance(value, float):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f'the string "{value}"' if _SAFE_TEXT.fullmatch(value) else "a string"
    if isinstance(value, list):
        return f"a list of length {len(value)}"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# ====================================================================== reading

class _NonFinite:
    """A JSON number that is not finite (NaN, ±Infinity, 1e999): kept so the field is named."""

    def __init__(self, text: str) -> None:
        self.text = text


def _parse_float(text: str) -> float | _NonFinite:
    value = float(text)
    return value if math.isfinite(value) else _NonFinite(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are unique: with a duplicate, which value counts is unclear."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise PacplanError(f"duplicate field {_show(key).removeprefix('the string ')}")
        out[key] = value
    return out


def _find_non_finite(obj: Any, name: str = "") -> tuple[str, str] | None:
    """(field, token) of the first non-finite number anywhere in the parsed JSON."""
    if isinstance(obj, _NonFinite):
        return name, obj.text
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(
        obj, list) else ()
    for key, value in items:
        sub = f"{name}[{key}]" if isinstance(key, int) else f"{name}.{key}" if name else key
        found = _find_non_finite(value, sub)
        if found:
            return found
    return None


def _read_json(path: Path) -> Any:
    """The parsed certificate file: UTF-8 JSON, unique keys, every number finite."""
    if not path.is_file():
        raise PacplanError(f"no such certificate file {path}")
    size = path.stat().st_size
    if size > _MAX_BYTES:
        raise PacplanError(f"{path}: {size} bytes is too large for a certificate "
                           f"(limit {_MAX_BYTES})")
    try:
        text = path.read_bytes().decode("utf-8")
        data = json.loads(text, parse_float=_parse_float, parse_constant=_NonFinite,
                          object_pairs_hook=_unique_keys)
    except PacplanError as exc:
        raise PacplanError(f"{path}: not a pacplan certificate ({exc})") from None
    except UnicodeDecodeError:
        raise PacplanError(f"{path}: not a pacplan certificate (not UTF-8 text)") from None
    except (ValueError, RecursionError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise PacplanError(f"{path}: not a pacplan certificate (not valid JSON: {reason})"
                           ) from None
    except OSError as exc:
        raise PacplanError(f"{path}: cannot read ({exc.strerror or exc})") from None
    found = _find_non_finite(data)
    if found:
        raise PacplanError(f"{path}: field {found[0]} is {found[1]} but must be finite: "
                           "non-finite numbers are never part of a certificate")
    return data


@dataclass(frozen=True)
class _Loaded:
    certificate: Certificate
    record: CertificateRecord
    provenance: ProvenanceRecord | None


def _load(path: Path, check_hash: bool = True) -> _Loaded:
    """Parse and type-check a certificate file, and check its content hash if asked."""
    record, provenance = _validate(_read_json(path), str(path))
    if check_hash:
        _check_content_hash(record, str(path))
    return _Loaded(_to_certificate(record, path), record, provenance)


def _check_content_hash(record: CertificateRecord, where: str) -> None:
    if record.content_sha256 is not None and _content_hash(record) != record.content_sha256:
        raise PacplanError(f"{where}: content_sha256 does not match the certificate's content: "
                           "a field was edited after the certificate was written")


def _to_certificate(record: CertificateRecord, path: Path) -> Certificate:
    d = record.model_dump()
    for key in ("cert_matrix", "test_matrix"):
        if d[key] is not None:
            ref = MatrixRef(**d[key])
            try:
                ref.path = str((path.parent / ref.path).resolve())
            except (OSError, ValueError):
                raise PacplanError(f"{path}: field {key}.path is not a usable file path"
                                   ) from None
            d[key] = ref
    if d["beta"] == "inf":
        d["beta"] = math.inf
    return Certificate(**d)


# ====================================================================== building

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


# ====================================================================== verifying

def verify(path: str | Path) -> Certificate:
    """Check every field of a saved certificate: types, content hash, provenance against its
    run directory, and every number recomputed from the sha256-checked matrices. Raises one
    line naming what differs."""
    try:
        return _verify(Path(path))
    except PacplanError as exc:  # a path or value from the file may hold a line break
        raise PacplanError(_one_line(str(exc))) from None


def _one_line(text: str) -> str:
    """Control characters (line breaks above all) shown escaped, so an error stays one line."""
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch).startswith("C") else ch
                   for ch in text)


def _verify(path: Path) -> Certificate:
    loaded = _load(path, check_hash=False)  # checked last: a recomputed field is named first
    c, where = loaded.certificate, str(path)
    run = _run_dir_of(path)
    _check_hash_coverage(loaded, run, where)
    _raise_if(where, _check_fields(c))
    if loaded.provenance is not None:
        _raise_if(where, _check_seeds(c, loaded.provenance))
        if run is not None:
            _check_against_run(run, loaded, where)
    cert = _reload(c.cert_matrix, "cert_matrix", "certification matrix", c.m, where)
    test = None
    if c.test_matrix is not None:
        test = _reload(c.test_matrix, "test_matrix", "test matrix", c.m, where)
    _raise_if(where, _check_posterior(c, cert.values))
    at_p = evaluate_posterior(np.asarray(c.p, dtype=np.float64), cert.values,
                              uniform_prior(c.m), c.bound, c.delta, c.solver, c.beta)
    _raise_if(where, _recompute(c, cert, test, at_p) + _resolve(c, cert, at_p))
    _check_content_hash(loaded.record, where)
    return c


def _raise_if(where: str, problems: list[str]) -> None:
    if problems:
        raise PacplanError(f"{where}: " + "; ".join(problems))


def _run_dir_of(path: Path) -> Path | None:
    """The run directory holding this certificate (<run>/ or <run>/certificates/), if any."""
    folder = path.resolve().parent
    for candidate in (folder, folder.parent if folder.name == "certificates" else None):
        if candidate is not None and (candidate / "manifest.json").is_file():
            return candidate
    return None


def _check_hash_coverage(loaded: _Loaded, run: Path | None, where: str) -> None:
    """Without content_sha256, only a run's own manifest can vouch for the provenance."""
    if loaded.record.content_sha256 is not None:
        return
    if run is None or loaded.provenance is None:
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
    if c.solver == "gibbs" and c.beta is None:
        problems.append("beta is null but a gibbs posterior is p_β for a recorded beta")
    if c.solver != "gibbs" and c.beta is not None:
        problems.append(f"beta is {c.beta!r} but solver {c.solver} records none (only gibbs "
                        "has a beta; a rep certificate has beta null)")
    return problems


def _check_seeds(c: Certificate, prov: ProvenanceRecord) -> list[str]:
    """Seed ranges: well formed, disjoint (the bound needs S independent of the prior and of
    the test set), and as long as the rows they name."""
    ranges = {"prior": prov.seeds.prior, "cert": prov.seeds.cert, "test": prov.seeds.test}
    problems = [f"provenance.seeds.{role} is {r}: a range [start, stop) needs start < stop"
                for role, r in ranges.items() if r[1] <= r[0]]
    roles = list(ranges)
    for i, a in enumerate(roles):
        for b in roles[i + 1:]:
            (a0, a1), (b0, b1) = ranges[a], ranges[b]
            if a0 < b1 and b0 < a1:
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


def _short(digest: str | None) -> str:
    return "null" if digest is None else f"{str(digest)[:12]}…"


def _check_against_run(run: Path, loaded: _Loaded, where: str) -> None:
    """Provenance against manifest.json and the files it records (prior, policies, matrices)."""
    from pacplan.run.rundir import Manifest, RunDir

    c, prov = loaded.certificate, loaded.provenance
    assert prov is not None
    try:
        manifest = Manifest(run)
        problems = _check_artifact(manifest, RunDir.PRIOR, "prior_sha256", prov.prior_sha256)
        problems += _check_artifact(manifest, RunDir.POLICIES, "policies_sha256",
                                    prov.policies_sha256)
    except PacplanError as exc:
        raise PacplanError(f"{where}: {exc}") from None
    drawn = manifest.inputs(RunDir.POLICIES)
    if drawn.get("prior") != prov.prior_sha256:
        problems.append(f"provenance.prior_sha256 is {_short(prov.prior_sha256)} but "
                        f"manifest.json records policies.npy drawn from prior "
                        f"{_short(drawn.get('prior'))}")
    if drawn.get("m") != c.m:
        problems.append(f"m is {c.m} but manifest.json records {drawn.get('m')!r} policies")
    problems += _check_matrix_inputs(run, manifest, "cert", c.cert_matrix, prov)
    if c.test_matrix is not None:
        problems += _check_matrix_inputs(run, manifest, "test", c.test_matrix, prov)
    if loaded.record.content_sha256 is None:
        problems += _check_prior_seeds(run, prov)
    _raise_if(where, problems)


def _check_artifact(manifest: Any, name: str, key: str, claimed: str | None) -> list[str]:
    """The provenance hash of `name` is the manifest's, and the file still has it."""
    recorded = manifest.sha(name)
    if recorded is None:
        return [f"{name} is not recorded in manifest.json, so provenance.{key} is unchecked"]
    if claimed != recorded:
        return [f"provenance.{key} is {_short(claimed)} but manifest.json records "
                f"{_short(recorded)} for {name}"]
    manifest.check(name)  # raises if the file changed or is missing
    return []


def _check_matrix_inputs(run: Path, manifest: Any, role: str, ref: MatrixRef,
                         prov: ProvenanceRecord) -> list[str]:
    """The run's matrix is the one referenced, made for these policies, world and seeds."""
    from pacplan.run.rundir import RunDir, identity

    name, key = RunDir.costs(role), f"{role}_matrix"
    problems = []
    if Path(ref.path) != (run / name).resolve():
        problems.append(f"{key}.path is {ref.path} but a run's certificate uses its {name}")
    if manifest.sha(name) != ref.sha256:
        problems.append(f"{key}.sha256 is {_short(ref.sha256)} but manifest.json records "
                        f"{_short(manifest.sha(name))} for {name}")
    made = manifest.inputs(name)
    if made.get("policies") != prov.policies_sha256:
        problems.append(f"provenance.policies_sha256 is {_short(prov.policies_sha256)} but "
                        f"manifest.json records {name} made for policies "
                        f"{_short(made.get('policies'))}")
    if identity(made.get("world")) != identity(prov.world.model_dump()):
        problems.append(f"provenance.world is not the world manifest.json records for {name}")
    seeds, claimed = made.get("seeds"), getattr(prov.seeds, role)
    ok = isinstance(seeds, list) and len(seeds) == 2 and claimed[0] == seeds[0] and (
        claimed[1] <= seeds[1] if role == "cert" else claimed[1] == seeds[1])
    if not ok:
        problems.append(f"provenance.seeds.{role} is {claimed} but manifest.json records "
                        f"{name} computed on seeds {seeds!r}")
    return problems


def _check_prior_seeds(run: Path, prov: ProvenanceRecord) -> list[str]:
    """An unhashed (old) certificate's prior seeds are held to its run's frozen config."""
    from pacplan.config import load_config

    try:
        prior = list(load_config(run / "config.yaml").seeds.prior)
    except PacplanError as exc:
        return [f"provenance.seeds.prior cannot be checked without content_sha256 ({exc})"]
    if prior != prov.seeds.prior:
        return [f"provenance.seeds.prior is {prov.seeds.prior} but the run's config.yaml says "
                f"{prior}"]
    return []


def _reload(ref: MatrixRef, key: str, label: str, m: int, where: str) -> CostMatrix:
    """A referenced matrix: sha256 checked first, then its first `rows` rows read and
    checked, with out-of-range entries clipped and counted (compared with `clipped` later)."""
    path = Path(ref.path)
    if not path.is_file():
        raise PacplanError(f"{where}: {label} {path} is missing ({key}.path)")
    digest = sha256_file(path)
    if digest != ref.sha256:
        raise PacplanError(f"{where}: {label} {path} has changed (sha256 {digest[:12]}… ≠ "
                           f"recorded {key}.sha256 {ref.sha256[:12]}…)")
    raw = load_npy(path, name=f"{label} {path}")
    if raw.ndim == 2 and ref.rows > raw.shape[0]:
        raise PacplanError(f"{where}: {key}.rows is {ref.rows} but {label} {path} has "
                           f"{raw.shape[0]} rows")
    values, clipped = check_unit_costs(raw[: ref.rows], f"{label} {path}", clip=True)
    if values.shape[1] != m:
        raise PacplanError(f"{where}: m is {m} but {label} {path} has {values.shape[1]} "
                           "columns (policies)")
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
                              posterior=at_p)
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
    fresh = optimize(cert.values, c.delta, bound=c.bound, solver=c.solver.split(":")[0])
    if fresh.value < at_p.value - _POSTERIOR_TOL:
        return [f"posterior is not optimal: re-solving with {c.solver} gives {c.bound} bound "
                f"{fresh.value:.9f}, stored p gives {at_p.value:.9f}"]
    if fresh.value > at_p.value + _POSTERIOR_TOL:
        return [f"solver {c.solver} does not reproduce p: re-solving gives {c.bound} bound "
                f"{fresh.value:.9f}, stored p gives {at_p.value:.9f}"]
    return []
