"""The certificate's JSON format, read strictly: the types `verify` can trust.

A certificate file is parsed with no duplicate keys and no NaN or infinity anywhere, then
validated by pydantic models with strict types (\"0.5\" is not a number, true is not 1) and no
unknown fields; every problem is one line naming the field, what was found and the rule.
`content_sha256` is the sha256 of the canonical content without itself: it catches accidental
edits only (anyone can recompute it); the guarantee against a deliberate edit is that `verify`
recomputes every number from the sha256-checked matrices.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pacplan.choices import BOUND_CHOICES, BOUNDS
from pacplan.errors import PacplanError

SOLVER_NAMES = ("gibbs", "rep:clarabel", "rep:mosek")
"""What a certificate's `solver` may say: the solver and, for rep, its conic backend."""
_MAX_BYTES = 256 * 2**20  # a certificate of 10⁶ policies is ~25 MB

_Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
_Unit = Annotated[float, Field(ge=0.0, le=1.0)]
_Seeds = Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=2, max_length=2)]
_SHA_RULE = "a sha256 (64 lowercase hex digits)"
_SEEDS_RULE = "a seed range [start, stop] of two integers ≥ 0"
_ITEM_RULES = {"p": "a number in [0, 1]", "test_ci": "a number in [0, 1]",
               "columns": "an integer ≥ 0",
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
    prior_world: WorldRecord | None = Field(
        default=None, description="an object {name, options}: the world the prior file says it "
        "was trained in (absent when it does not say)")


class CertificateRecord(_Record):
    """The certificate file, field by field (see docs/verify.md, what `verify` checks)."""

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
        description="an object: {}, {world, seeds, prior_sha256, policies_sha256} or "
                    "{certify_policy}")
    columns: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)] | None = Field(
        default=None, description="a list of column indices (integers ≥ 0): the policies a "
        "screened certificate's matrices hold")
    pacplan_version: str = Field(min_length=1, description="a version string")
    created: str = Field(pattern=r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$",
                         description='a string "YYYY-MM-DDThh:mm:ssZ" (UTC)')
    content_sha256: _Sha256 = Field(default=None, description=_SHA_RULE)  # type: ignore[assignment]


def certificate_content_sha256(data: dict[str, Any], source: str = "certificate") -> str:
    """sha256 of a certificate's canonical content: every field but `content_sha256`, as
    validated (1 and 1.0 are the same number), sorted keys, no whitespace."""
    return content_hash(validate_record(data, source)[0])


def content_hash(record: CertificateRecord) -> str:
    # `columns` is absent from a plain certificate (and from every one written before it
    # existed): left out of the hash when null, so their hashes are unchanged
    exclude = {"content_sha256"} | ({"columns"} if record.columns is None else set())
    content = record.model_dump(mode="json", exclude=exclude)
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def validate_record(data: Any, source: str) -> tuple[CertificateRecord, ProvenanceRecord | None]:
    """The certificate and its provenance as strict records, or one line naming the field."""
    if not isinstance(data, dict):
        raise PacplanError(f"{source}: not a pacplan certificate (a JSON object); found "
                           f"{_show(data)}")
    try:
        record = CertificateRecord.model_validate(data)
    except ValidationError as exc:
        raise PacplanError(f"{source}: {_schema_problem(exc, CertificateRecord, ())}") from None
    if not record.provenance or _is_policy_provenance(record.provenance):
        return record, None  # a certify-policy folder's own check reads that one
    try:
        return record, ProvenanceRecord.model_validate(record.provenance)
    except ValidationError as exc:
        problem = _schema_problem(exc, ProvenanceRecord, ("provenance",))
        raise PacplanError(f"{source}: {problem}") from None


def _is_policy_provenance(provenance: dict[str, Any]) -> bool:
    """`{"certify_policy": {...}}`: what `pacplan certify-policy` certified
    (`pacplan.policy_certification.provenance`), not a run's world and seeds."""
    return list(provenance) == ["certify_policy"] and isinstance(provenance["certify_policy"],
                                                                  dict)


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


def read_json(path: Path) -> Any:
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


def check_content_hash(record: CertificateRecord, where: str) -> None:
    if record.content_sha256 is not None and content_hash(record) != record.content_sha256:
        raise PacplanError(f"{where}: content_sha256 does not match the certificate's content: "
                           "a field was edited after the certificate was written")
