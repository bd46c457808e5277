"""Do two run directories agree? The reproducibility contract (docs/reproducibility.md) as code.

Whatever executor (serial, processes, Ray) or x86-64 machine made them, two runs of the same
config must agree artifact by artifact:

- **byte-identical**: the prior (`prior.safetensors`, and `es_state.safetensors` where ES ran),
  the stored policies, every cost matrix (`costs/*.npy`, or `costs/*.safetensors` stored as
  exact numerators over a denominator) — environments come from seeds and
  nothing on the path to these bytes depends on the CPU's kernels (ES uses
  `pacplan.portable`; worlds are deterministic);
- **equal to a tolerance** (`TOLERANCE`, relative, the one `verify` recomputes certificates
  to): every number of every certificate and of the ES log, whose arithmetic goes through
  NumPy's transcendental functions (which NumPy runs on its own AVX-512 kernels where a CPU
  has them) and so may move in its last bits; text, integers and hashes exactly;
- **the config** parsed, without its `executor` section (how the work was spread, never what
  it computes), each input file it names (prior, ES start, baseline weights) by its sha256
  where it is found: where a file lies is no part of a result;
- **not compared**: wall-clock times (`timings.json`, each ES line's `seconds`, a
  certificate's `created` and the `content_sha256` that covers it: those top-level fields only,
  the same names anywhere else are compared), the manifest (a ledger of the hashes compared
  above), the report and figures (drawn from the compared artifacts) and crossval/ (replays in
  another engine, for people).

`compare_runs` returns the first difference, or None; the CLI prints it and exits 1.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import config_to_dict, files_read_from, parse_config
from pacplan.errors import PacplanError
from pacplan.io.files import npy_from_bytes, read_file_bytes, sha256_file
from pacplan.io.yamlio import read_yaml
from pacplan.pipeline.rundir import Manifest, RunDir

TOLERANCE = 1e-9
"""|a − b| ≤ TOLERANCE · max(1, |a|, |b|): what `verify` allows a recomputed certificate number.
Last-bit differences are about 1e-16; a certificate is printed to 0.01 %."""

CERTIFICATE_UNCOMPARED = frozenset({"created", "content_sha256"})
"""A certificate's top-level fields that are not compared: its wall-clock time and the hash that
covers it. Only there: a `created` or `seconds` anywhere else (a world option, a provenance
entry) is data, compared like any other field."""
METRICS_UNCOMPARED = frozenset({"seconds"})
"""An ES log line's top-level field that is not compared: the iteration's wall time."""
_NOT_CONTRACT = {"executor"}  # config sections that choose how, not what, is computed


@dataclass(frozen=True)
class Difference:
    """The first artifact on which two runs disagree, and where in it."""

    artifact: str
    detail: str

    def __str__(self) -> str:
        return f"{self.artifact}: {self.detail}"


@dataclass(frozen=True)
class Agreement:
    """What was compared when two runs agree."""

    identical: list[str]
    within_tolerance: list[str]


def compare_runs(a: str | Path, b: str | Path) -> Difference | Agreement:
    """The first difference between run directories `a` and `b` under the contract, or what
    agreed. Raises `PacplanError` when either is not a run directory or a file is unreadable."""
    dirs = (_run_dir(a), _run_dir(b))
    for d in dirs:  # a shipped run leaves its draws out: drawn again, hash-checked
        if (d / RunDir.MANIFEST).is_file():
            Manifest(d).check(RunDir.POLICIES)
    identical: list[str] = []
    within: list[str] = []
    for name, kind in _artifacts(*dirs):
        present = [(d / name).exists() for d in dirs]
        if present != [True, True]:
            where = "first" if present[0] else "second"
            return Difference(name, f"present in the {where} run only ({dirs[present[1]]})")
        detail = _COMPARERS[kind](name, *(d / name for d in dirs))
        if detail is not None:
            return Difference(name, detail)
        (identical if kind in ("bytes", "npy", "safetensors") else within).append(name)
    return Agreement(identical, within)


def _run_dir(path: str | Path) -> Path:
    p = Path(path)
    if not p.is_dir():
        raise PacplanError(f"{p}: no such run directory")
    if not (p / RunDir.CONFIG).is_file():
        raise PacplanError(f"{p}: not a run directory (no {RunDir.CONFIG}; made by pacplan run "
                           "or pacplan train-prior)")
    return p


def _artifacts(a: Path, b: Path) -> Iterator[tuple[str, str]]:
    """(name, kind) of every contract artifact present in either run, in pipeline order."""
    yield RunDir.CONFIG, "config"
    for name, kind in ((RunDir.PRIOR, "safetensors"), (RunDir.ES_STATE, "safetensors"),
                       (RunDir.METRICS, "jsonl"), (RunDir.POLICIES, "npy")):
        if (a / name).exists() or (b / name).exists():
            yield name, kind
    for pattern, kind in (("costs/*.npy", "npy"), ("costs/*.safetensors", "safetensors"),
                          ("certificates/N*.json", "json")):
        names = {p.relative_to(d).as_posix() for d in (a, b) for p in d.glob(pattern)}
        yield from ((n, kind) for n in sorted(names, key=_natural))
    if (a / RunDir.CERTIFICATE).exists() or (b / RunDir.CERTIFICATE).exists():
        yield RunDir.CERTIFICATE, "json"


def _natural(name: str) -> tuple[int, str]:
    """certificates/N500 before N1000: the number in a name counts as a number."""
    digits = "".join(ch for ch in Path(name).stem if ch.isdigit())
    return (int(digits) if digits else -1, name)


# --------------------------------------------------------------------------- byte-identical


def _compare_npy(name: str, a: Path, b: Path) -> str | None:
    raw_a, raw_b = read_file_bytes(a, f"{a}"), read_file_bytes(b, f"{b}")
    if raw_a == raw_b:
        return None
    detail = _array_difference(npy_from_bytes(raw_a, str(a)), npy_from_bytes(raw_b, str(b)))
    return detail or "the same values, different bytes (header or layout)"


def _compare_safetensors(name: str, a: Path, b: Path) -> str | None:
    raw_a, raw_b = read_file_bytes(a, f"{a}"), read_file_bytes(b, f"{b}")
    if raw_a == raw_b:
        return None
    tensors_a, tensors_b = _safetensors(raw_a, a), _safetensors(raw_b, b)
    if sorted(tensors_a) != sorted(tensors_b):
        return f"tensors {sorted(tensors_a)} vs {sorted(tensors_b)}"
    for key in sorted(tensors_a):
        detail = _array_difference(tensors_a[key], tensors_b[key])
        if detail is not None:
            return f"tensor {key}: {detail}"
    return "the same tensors, different bytes (metadata or layout)"


def _safetensors(raw: bytes, path: Path) -> dict[str, np.ndarray]:
    from safetensors import SafetensorError
    from safetensors.numpy import load

    try:
        return load(raw)
    except (SafetensorError, ValueError) as exc:
        raise PacplanError(f"{path}: unreadable safetensors file ({exc})") from None


def _array_difference(x: np.ndarray, y: np.ndarray) -> str | None:
    """Where two arrays first differ, by how much, and how many entries differ; None when every
    entry is the same (a NaN equal to a NaN, 0.0 not equal to −0.0)."""
    if x.dtype != y.dtype or x.shape != y.shape:
        return f"{x.dtype} {x.shape} vs {y.dtype} {y.shape}"
    same = x == y
    if np.issubdtype(x.dtype, np.floating):
        same |= np.isnan(x) & np.isnan(y)
        same &= np.signbit(x) == np.signbit(y)
    differ = np.flatnonzero(~same)
    if differ.size == 0:
        return None
    index = tuple(int(i) for i in np.unravel_index(differ[0], x.shape))
    u, v = x[index].item(), y[index].item()
    delta = f" (Δ {float(v) - float(u):.3g})" if np.issubdtype(x.dtype, np.number) else ""
    where = ", ".join(map(str, index))
    return (f"first difference at [{where}]: {u!r} vs {v!r}{delta}; "
            f"{differ.size:,} of {x.size:,} entries differ")


# --------------------------------------------------------------------------- to a tolerance


def _compare_json(name: str, a: Path, b: Path) -> str | None:
    return value_difference(_json(a), _json(b), "", CERTIFICATE_UNCOMPARED)


def _compare_jsonl(name: str, a: Path, b: Path) -> str | None:
    lines_a, lines_b = _json_lines(a), _json_lines(b)
    for number, (u, v) in enumerate(zip(lines_a, lines_b, strict=False), start=1):
        detail = value_difference(u, v, "", METRICS_UNCOMPARED)
        if detail is not None:
            return f"line {number}: {detail}"
    if len(lines_a) != len(lines_b):
        return f"{len(lines_a)} lines vs {len(lines_b)}"
    return None


def _compare_config(name: str, a: Path, b: Path) -> str | None:
    return value_difference(_contract_config(a), _contract_config(b), "", frozenset())


def _contract_config(path: Path) -> dict[str, Any]:
    """A frozen config as the contract reads it: parsed, without what only chooses how work is
    spread, and each file it names by its content where the file is found (read from the run's
    folder): one run frozen with an absolute path and its shipped copy with a relative one
    name the same prior."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise PacplanError(f"{path}: not a config (a YAML mapping)")
    cfg = files_read_from(parse_config(data, source=str(path)), path.parent)
    for section, field in cfg.input_files():
        file = Path(getattr(section, field))
        if file.is_file():
            setattr(section, field, f"sha256 {sha256_file(file)}")
    return {k: v for k, v in config_to_dict(cfg).items() if k not in _NOT_CONTRACT}


def _json(path: Path) -> Any:
    try:
        return json.loads(read_file_bytes(path, str(path)))
    except (ValueError, RecursionError) as exc:
        raise PacplanError(f"{path}: not valid JSON ({type(exc).__name__})") from None


def _json_lines(path: Path) -> list[Any]:
    text = read_file_bytes(path, str(path)).decode("utf-8", errors="replace")
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except (ValueError, RecursionError):
                raise PacplanError(f"{path}: line {number} is not valid JSON") from None
    return out


def value_difference(u: Any, v: Any, where: str = "",
                     uncompared: frozenset[str] = CERTIFICATE_UNCOMPARED) -> str | None:
    """The first field (a dotted path, list indices in brackets) where two parsed JSON values
    disagree under the contract (numbers to `TOLERANCE`), or None. `uncompared` names the
    top-level keys left out (by default a certificate's wall-clock `created` and its hash):
    only where the contract says so, never a key of that name deeper down."""
    label = f"field {where}" if where else "the value"
    if isinstance(u, dict) and isinstance(v, dict):
        keys_u, keys_v = set(u) - uncompared, set(v) - uncompared
        if keys_u != keys_v:
            only = sorted(keys_u ^ keys_v)
            return f"field {_join(where, only[0])} is in one run only"
        for key in sorted(keys_u):
            detail = value_difference(u[key], v[key], _join(where, key), frozenset())
            if detail is not None:
                return detail
        return None
    if isinstance(u, list) and isinstance(v, list):
        if len(u) != len(v):
            return f"{label} has {len(u)} entries vs {len(v)}"
        for i, (x, y) in enumerate(zip(u, v, strict=True)):
            detail = value_difference(x, y, f"{where}[{i}]", frozenset())
            if detail is not None:
                return detail
        return None
    if _is_number(u) and _is_number(v) and (isinstance(u, float) or isinstance(v, float)):
        if _close(float(u), float(v)):
            return None
        return (f"{label}: {u!r} vs {v!r} (Δ {float(v) - float(u):.3g}, tolerance "
                f"{TOLERANCE:g} relative)")
    if type(u) is not type(v) or u != v:
        return f"{label}: {u!r} vs {v!r}"
    return None


def _is_number(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _close(x: float, y: float) -> bool:
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    if math.isinf(x) or math.isinf(y):
        return x == y
    return abs(x - y) <= TOLERANCE * max(1.0, abs(x), abs(y))


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


_COMPARERS = {
    "config": _compare_config,
    "safetensors": _compare_safetensors,
    "npy": _compare_npy,
    "jsonl": _compare_jsonl,
    "json": _compare_json,
}
