"""A distillation round's weights file, read and written one way for every world's teacher.

`round-<r>.safetensors` holds the round's θ and, in its metadata, the round's log record, so a
round is finished exactly when its weights file is listed in the folder's ledger
(`pacplan.pipeline.execution.chunks.Ledger`) and whole; rounds.jsonl beside it is for people only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.files import (
    append_json_line,
    atomic_write_bytes,
    safetensors_bytes,
    safetensors_metadata,
)
from pacplan.pipeline.execution.chunks import Ledger
from pacplan.validation import check_finite

LOG = "rounds.jsonl"


def round_name(r: int) -> str:
    return f"round-{r}.safetensors"


def read_round(files: Ledger, r: int, dim: int, exact: bool = False
               ) -> tuple[np.ndarray, dict[str, Any]] | None:
    """Round r's θ (float32; `exact`: as stored) and log record when its file is listed and
    whole (checked, so an edited one is refused); None when the round is to be (re)computed."""
    weights = files.read(round_name(r))
    if weights is None:
        return None
    from safetensors.numpy import load

    label = str(files.folder / round_name(r))
    try:
        theta = load(weights)["theta"]
        rec = json.loads(safetensors_metadata(weights)["round"])
    except Exception as exc:  # the safetensors reader's errors have no common base
        why = str(exc).replace("\n", " ")
        raise PacplanError(f"{label}: unreadable round file ({why}); delete it to recompute "
                           "it") from None
    theta = check_finite(theta, label)
    if theta.shape != (dim,) or not isinstance(rec, dict):
        raise PacplanError(f"{label}: not a round of this net; delete it to recompute it")
    return (theta if exact else theta.astype(np.float32)), rec


def write_round(files: Ledger, r: int, theta: np.ndarray, rec: dict[str, Any]) -> None:
    """Log the round for people, then write and list its weights file (the round's end)."""
    append_json_line(files.folder / LOG, rec)
    files.write(round_name(r), safetensors_bytes({"theta": theta}, {"round": json.dumps(rec)}))


def mend_log(path: Path) -> None:
    """Drop a last line of rounds.jsonl that a kill cut short, so the next starts on its own
    line (the log is for people: each round's record is read from its checked weights file)."""
    if path.is_file():
        data = path.read_bytes()
        if data and not data.endswith(b"\n"):
            atomic_write_bytes(path, data[: data.rfind(b"\n") + 1])
