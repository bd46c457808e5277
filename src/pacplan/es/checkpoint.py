"""ES state and prior files: the checkpoint that makes prior training resumable bit for bit.

`es_state.safetensors` is the source of truth (every array of `ESState` in float64, scalars as
JSON metadata); `prior.safetensors` (mu, logvar) and `es_state.json` (for people) are derived from
it on every save. Files are written atomically and byte-reproducibly (`pacplan.io.files`); where
they live is the caller's business (`pacplan.pipeline.rundir` names them).

The state carries the sha256 of its own content in its metadata, so one atomic write is both the
checkpoint and its checksum: an edited or damaged state is named when read, never resumed. A
prior records the seed range it was trained on (metadata `prior_seeds`, "[start, stop]"), so a
run given that prior can check it against its certification and test seeds.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.es.algorithm import ESState
from pacplan.io.files import (
    append_json_line,
    atomic_write_bytes,
    atomic_write_json,
    safetensors_metadata,
    save_safetensors,
)

_FORMAT = 2  # 2: the state records its own sha256 (metadata "sha256")
_ARRAYS = ("mu", "logvar", "m_mu", "v_mu", "m_logvar", "v_logvar", "best_mu", "best_logvar")
_LOGVAR_MAX = 150.0  # σ = exp(logvar / 2) beyond this overflows the float32 policies drawn
SeedRange = tuple[int, int]


@dataclass(frozen=True)
class CheckpointFiles:
    """Where one ES run keeps its state, its derived prior and the metrics of each iteration."""

    state: Path
    state_json: Path
    prior: Path
    metrics: Path


@dataclass(frozen=True)
class Prior:
    """A prior file's content, checked: N(mu, diag exp(logvar)), the seeds it was trained
    on and the world it was trained in, {name, options} (each None when the file does not
    say)."""

    mu: np.ndarray
    logvar: np.ndarray
    seeds: SeedRange | None
    world: dict[str, Any] | None = None


def _scalars(state: ESState) -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "iteration": state.iteration,
        "best_cost": state.best_cost if math.isfinite(state.best_cost) else None,
        "best_iteration": state.best_iteration,
        "stall": state.stall,
        "utility": state.utility,
        **state.extra,
    }


def _digest(arrays: dict[str, np.ndarray], es_meta: str) -> str:
    """sha256 of a state's content (scalars, then each array's name, dtype, shape and bytes)."""
    h = hashlib.sha256(es_meta.encode())
    for k in _ARRAYS:
        a = np.ascontiguousarray(arrays[k])
        h.update(f"\0{k}\0{a.dtype.str}\0{a.shape}\0".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def save_prior(path: str | Path, mu: np.ndarray, logvar: np.ndarray, iteration: int,
               seeds: SeedRange | list[int] | None = None,
               distill: dict[str, Any] | None = None, sigma_scale: float = 1.0,
               world: dict[str, Any] | None = None) -> None:
    """A prior N(mu, diag exp(logvar)) as safetensors (float64), with its training seeds, the
    world it was trained in (metadata `world`, {name, options}: a certificate in another world
    or engine is then a transfer experiment and says so) and, when its ES started from a
    taught net, how it was taught (metadata `distill`). With
    `sigma_scale` ≠ 1 the file's σ is ES's σ times it (logvar + 2 ln s), recorded as
    metadata `sigma_scale` so the file says it is narrower than what ES trained."""
    meta = {"iteration": str(iteration), "parametrization": "N(mu, diag exp(logvar))"}
    if sigma_scale != 1.0:
        if not (math.isfinite(sigma_scale) and 0 < sigma_scale <= 1):
            raise PacplanError(f"sigma_scale must be in (0, 1], got {sigma_scale!r}")
        logvar = np.asarray(logvar, np.float64) + 2.0 * math.log(sigma_scale)
        meta["sigma_scale"] = repr(float(sigma_scale))
    if seeds is not None:
        meta["prior_seeds"] = json.dumps([int(seeds[0]), int(seeds[1])])
    if distill is not None:
        meta["distill"] = json.dumps(distill, sort_keys=True)
    if world is not None:
        meta["world"] = json.dumps(_world_record(world, "world"), sort_keys=True)
    save_safetensors(path, {"mu": np.asarray(mu, np.float64),
                            "logvar": np.asarray(logvar, np.float64)}, meta)


def save_checkpoint(files: CheckpointFiles, state: ESState) -> None:
    """Write the state (the source of truth, with its checksum), then the prior and the JSON
    derived from it."""
    es_meta = json.dumps(_scalars(state), sort_keys=True)
    arrays = {k: np.ascontiguousarray(getattr(state, k), dtype=np.float64) for k in _ARRAYS}
    save_safetensors(files.state, arrays, {"es": es_meta, "sha256": _digest(arrays, es_meta)})
    save_prior(files.prior, arrays["mu"], arrays["logvar"], state.iteration,
               state.extra.get("prior_seeds"), state.extra.get("distill"),
               state.extra.get("prior_sigma_scale", 1.0), state.extra.get("world"))
    info = _scalars(state) | {
        "rng": {"generator": "PCG64(SeedSequence([es.seed, iteration]))",
                "next_iteration": state.iteration},
        "sigma_mean": float(state.sigma.mean()),
    }
    atomic_write_json(files.state_json, info)


def _read_state(path: Path) -> tuple[dict[str, str], dict[str, np.ndarray]]:
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="numpy") as fh:
            return dict(fh.metadata() or {}), {k: fh.get_tensor(k) for k in _ARRAYS}
    except Exception as exc:
        raise PacplanError(f"{path}: unreadable ES checkpoint ({exc}); delete it to train the "
                           "prior again from the start") from None


def load_checkpoint(files: CheckpointFiles) -> ESState | None:
    """The saved ES state, checked against its recorded sha256, or None when there is none."""
    path = files.state
    if not path.exists():
        return None
    meta, arrays = _read_state(path)
    es_meta, recorded = meta.get("es"), meta.get("sha256")
    if es_meta is None or recorded is None:
        raise PacplanError(f"{path}: ES checkpoint without a checksum (written by an older "
                           "pacplan, or edited); delete it to train the prior again from the start")
    actual = _digest(arrays, es_meta)
    if actual != recorded:
        raise PacplanError(f"{path}: the ES checkpoint has changed or is corrupted (sha256 "
                           f"{actual[:12]}… ≠ recorded {recorded[:12]}…); delete it to train "
                           "the prior again from the start")
    scalars = json.loads(es_meta)
    if scalars.get("format") != _FORMAT:
        raise PacplanError(f"{path}: unsupported checkpoint format {scalars.get('format')}")
    best = scalars.pop("best_cost")
    core = {k: scalars.pop(k) for k in ("iteration", "best_iteration", "stall", "utility")}
    scalars.pop("format")
    return ESState(**arrays, **core, best_cost=math.inf if best is None else float(best),
                   extra=scalars)


def _check_tensor(values: np.ndarray, name: str, tensor: str) -> np.ndarray:
    """One prior tensor: 1-D floats, not empty, finite."""
    if values.dtype.kind != "f":
        raise PacplanError(f"{name}: {tensor} must hold floating-point numbers, got "
                           f"{values.dtype}")
    if values.ndim != 1:
        raise PacplanError(f"{name}: {tensor} must be 1-D (one value per weight), got shape "
                           f"{values.shape}")
    if values.size == 0:
        raise PacplanError(f"{name}: {tensor} is empty")
    bad = int((~np.isfinite(values)).sum())
    if bad:
        raise PacplanError(f"{name}: {tensor} has {bad} values that are not finite (NaN or ±inf)")
    return values


def _check_prior(tensors: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
    """(mu, logvar) of a prior file, each checked and named."""
    for tensor in ("mu", "logvar"):
        if tensor not in tensors:
            raise PacplanError(f"{name}: a prior needs tensors 'mu' and 'logvar' (missing "
                               f"{tensor!r}; found {', '.join(sorted(tensors)) or 'none'})")
    mu = _check_tensor(tensors["mu"], name, "mu")
    logvar = _check_tensor(tensors["logvar"], name, "logvar")
    if logvar.size != mu.size:
        raise PacplanError(f"{name}: logvar has {logvar.size} weights but mu has {mu.size}")
    if float(logvar.max()) > _LOGVAR_MAX:
        raise PacplanError(f"{name}: logvar reaches {float(logvar.max()):g}, too large (above "
                           f"{_LOGVAR_MAX:g}, σ = exp(logvar / 2) overflows float32 policies)")
    return mu, logvar


def _seed_range(raw: str | None, name: str) -> SeedRange | None:
    """The `prior_seeds` metadata: "[start, stop]" with 0 ≤ start < stop, or None if absent."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        value = None
    ok = (isinstance(value, list) and len(value) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
          and 0 <= value[0] < value[1])
    if not ok:
        raise PacplanError(f"{name}: metadata prior_seeds {raw!r} is not a seed range "
                           "[start, stop] with 0 ≤ start < stop")
    return int(value[0]), int(value[1])


def read_prior(data: bytes, name: str) -> Prior:
    """A prior from the bytes of its .safetensors file (`name` is how errors call it): read
    once, so what was checked is what gets used."""
    from safetensors.numpy import load

    try:
        tensors = load(data)
        meta = safetensors_metadata(data)
    except Exception as exc:
        raise PacplanError(f"{name}: unreadable prior ({exc})".replace("\n", " ")) from None
    mu, logvar = _check_prior(tensors, name)
    world = None
    if "world" in meta:
        try:
            world = _world_record(json.loads(meta["world"]), f"{name}: metadata world")
        except (ValueError, RecursionError):
            raise PacplanError(f"{name}: metadata world is not JSON") from None
    return Prior(mu=mu, logvar=logvar, seeds=_seed_range(meta.get("prior_seeds"), name),
                 world=world)


def _world_record(value: Any, name: str) -> dict[str, Any]:
    """{name, options}: a world name (a string) and its options (an object)."""
    ok = (isinstance(value, dict) and set(value) == {"name", "options"}
          and isinstance(value["name"], str) and isinstance(value["options"], dict))
    if not ok:
        raise PacplanError(f"{name} must be an object {{name, options}}, got {value!r:.80}")
    return {"name": value["name"], "options": dict(value["options"])}


def read_prior_file(path: str | Path) -> Prior:
    """A prior .safetensors file, checked (see `read_prior`)."""
    p = Path(path)
    if not p.is_file():
        raise PacplanError(f"no prior found at {p}; run `pacplan train-prior` first")
    return read_prior(p.read_bytes(), str(p))


def load_prior(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(mu, logvar) from a prior .safetensors file, checked: 1-D, equal length, finite."""
    prior = read_prior_file(path)
    return prior.mu, prior.logvar


def load_prior_seeds(path: str | Path) -> SeedRange | None:
    """The seed range a prior file records it was trained on, or None when it does not say."""
    return read_prior_file(path).seeds


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The metrics.jsonl records, in order."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def truncate_metrics(path: Path, upto: int) -> None:
    """Drop records of iterations >= upto (written before a crash, redone after resume)."""
    if not path.exists():
        return
    keep = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):  # a line cut short by the crash
            continue
        if isinstance(rec, dict) and isinstance(rec.get("iteration"), int) and (
            rec["iteration"] < upto
        ):
            keep.append(rec)
    atomic_write_bytes(path, "".join(json.dumps(r) + "\n" for r in keep).encode())


def append_metric(path: Path, record: dict[str, Any]) -> None:
    """Append one record and fsync (a kill loses at most the line being written)."""
    append_json_line(path, record)
