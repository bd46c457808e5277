"""ES state and prior files: the checkpoint that makes prior training resumable bit for bit.

`es_state.safetensors` is the source of truth (every array of `ESState` in float64, scalars as
JSON metadata); `prior.safetensors` (mu, logvar) and `es_state.json` (for people) are derived from
it on every save. Files are written atomically and byte-reproducibly (`pacplan.files`); where
they live is the caller's business (`pacplan.run.rundir` names them).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.es.algorithm import ESState
from pacplan.files import atomic_write_bytes, atomic_write_json, save_safetensors

_FORMAT = 1
_ARRAYS = ("mu", "logvar", "m_mu", "v_mu", "m_logvar", "v_logvar", "best_mu", "best_logvar")


@dataclass(frozen=True)
class CheckpointFiles:
    """Where one ES run keeps its state, its derived prior and the metrics of each iteration."""

    state: Path
    state_json: Path
    prior: Path
    metrics: Path


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


def save_prior(path: str | Path, mu: np.ndarray, logvar: np.ndarray, iteration: int) -> None:
    """A prior N(mu, diag exp(logvar)) as safetensors (float64)."""
    meta = {"iteration": str(iteration), "parametrization": "N(mu, diag exp(logvar))"}
    save_safetensors(path, {"mu": np.asarray(mu, np.float64),
                            "logvar": np.asarray(logvar, np.float64)}, meta)


def save_checkpoint(files: CheckpointFiles, state: ESState) -> None:
    """Write the state (the source of truth), then the prior and the JSON derived from it."""
    meta = {"es": json.dumps(_scalars(state), sort_keys=True)}
    arrays = {k: np.ascontiguousarray(getattr(state, k), dtype=np.float64) for k in _ARRAYS}
    save_safetensors(files.state, arrays, meta)
    save_prior(files.prior, arrays["mu"], arrays["logvar"], state.iteration)
    info = _scalars(state) | {
        "rng": {"generator": "PCG64(SeedSequence([es.seed, iteration]))",
                "next_iteration": state.iteration},
        "sigma_mean": float(state.sigma.mean()),
    }
    atomic_write_json(files.state_json, info)


def load_checkpoint(files: CheckpointFiles) -> ESState | None:
    """The saved ES state, or None when there is none."""
    from safetensors import safe_open

    path = files.state
    if not path.exists():
        return None
    try:
        with safe_open(str(path), framework="numpy") as fh:
            meta = json.loads((fh.metadata() or {})["es"])
            arrays = {k: fh.get_tensor(k) for k in _ARRAYS}
    except Exception as exc:
        raise PacplanError(f"{path}: unreadable ES checkpoint ({exc})") from None
    if meta.get("format") != _FORMAT:
        raise PacplanError(f"{path}: unsupported checkpoint format {meta.get('format')}")
    best = meta.pop("best_cost")
    core = {k: meta.pop(k) for k in ("iteration", "best_iteration", "stall", "utility")}
    meta.pop("format")
    return ESState(**arrays, **core, best_cost=math.inf if best is None else float(best),
                   extra=meta)


def load_prior(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(mu, logvar) from a prior .safetensors file."""
    from safetensors.numpy import load_file

    p = Path(path)
    if not p.is_file():
        raise PacplanError(f"no prior found at {p}; run `pacplan train-prior` first")
    try:
        t = load_file(str(p))
    except Exception as exc:
        raise PacplanError(f"{p}: unreadable prior ({exc})") from None
    if "mu" not in t or "logvar" not in t:
        raise PacplanError(f"{p}: a prior needs tensors 'mu' and 'logvar'")
    return t["mu"], t["logvar"]


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
        except json.JSONDecodeError:  # a line cut short by the crash
            continue
        if isinstance(rec, dict) and isinstance(rec.get("iteration"), int) and (
            rec["iteration"] < upto
        ):
            keep.append(rec)
    atomic_write_bytes(path, "".join(json.dumps(r) + "\n" for r in keep).encode())


def append_metric(path: Path, record: dict[str, Any]) -> None:
    """Append one record and fsync (a kill loses at most the line being written)."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
