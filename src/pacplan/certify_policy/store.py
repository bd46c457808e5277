"""The directory `certify-policy --out` writes, resumable and never half-made.

    certify-policy.json      what is certified: environment, cost, policies (sha256), seeds
    certify-policy.lock      one process at a time (`pacplan.run.lock`)
    costs/cert.npy           N × m certification costs (row i: seed first_seed + i)
    costs/test.npy           T × m test costs (the T seeds after them), with --test-n
    costs/ledger.jsonl       the sha256 of each finished matrix
    costs/<role>.chunks/     finished rows of a matrix in progress (`pacplan.run.chunks`)
    certificate.json         the certificate, which `pacplan verify` checks from costs/

The stamp (certify-policy.json) is written before any rollout; a later command with the same
inputs resumes (finished rows are kept after a kill, each checked against its sha256), one with
other inputs is refused. The certificate is rebuilt on every command, so a new δ needs no new
rollout. A directory this command created is removed again when the command is refused (a
cost function that raises, say), so a failure leaves nothing half-made; a kill keeps it.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_json, npy_bytes
from pacplan.io.outputs import protecting_folder, refuse_overwriting, same_file
from pacplan.run.chunks import ChunkStore, Ledger
from pacplan.run.rundir import identity

MARK = "certify-policy.json"
LOCK = "certify-policy.lock"
COSTS = "costs"
CERTIFICATE = "certificate.json"
CHUNK_ROWS = 10
"""Rows per chunk: a kill loses at most this many seeds' rollouts."""


def default_out(env_id: str) -> Path:
    """runs/certify-<env_id>, the id reduced to characters safe in a folder name."""
    return Path("runs") / ("certify-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", env_id).strip("-."))


def is_policy_dir(path: str | Path) -> bool:
    """Whether `path` is a directory `certify-policy` made."""
    return (Path(path) / MARK).is_file()


def refuse_output(out: Path, inputs: dict[str, str | Path | None], option: str) -> None:
    """`out` must be a new or empty folder, or a certify-policy directory to resume; never an
    input, nor inside a planner or run directory (`pacplan.io.outputs`)."""
    if not is_policy_dir(out):
        refuse_overwriting(out, option, inputs)
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise PacplanError(f"{option} {out} exists and is not a certify-policy directory "
                               f"(it has no {MARK}): choose a new folder")
        return
    for name, path in inputs.items():
        if path is not None and same_file(out, path):
            raise PacplanError(f"{option} {out} is the input {name}: choose another output")
    inside = protecting_folder(out, itself=False)
    if inside is not None:
        raise PacplanError(f"{option} {out} is inside the {inside[0]} {inside[1]}: choose a "
                           "path outside it")


@contextlib.contextmanager
def removed_if_refused(out: Path) -> Iterator[None]:
    """Undo a new folder (absent or empty before, `refuse_output`) when this command is
    refused (a `PacplanError`) or fails to write (an `OSError`: a full disk, a read-only
    folder): removed, or emptied again, so a rerun is not blocked by a half-made folder; a kill
    or Ctrl-C keeps it, to be resumed, and a folder being resumed is always kept."""
    existed, fresh = out.exists(), not is_policy_dir(out)
    try:
        yield
    except (PacplanError, OSError):
        if fresh:
            shutil.rmtree(out, ignore_errors=True)
            if existed:
                out.mkdir(exist_ok=True)
        raise


def stamp(out: Path, inputs: dict[str, Any], option: str,
          notes: dict[str, Any] | None = None) -> None:
    """Write the stamp, or check that the one there names the same inputs; `notes` (where the
    policy files were) are recorded but are not part of the identity."""
    path = out / MARK
    record = {"identity": identity(inputs), "inputs": inputs, **(notes or {})}
    if not path.is_file():
        atomic_write_json(path, record)
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        old_inputs = old["inputs"]
    except (ValueError, KeyError, TypeError, OSError, RecursionError):
        raise PacplanError(f"{path}: not a readable certify-policy stamp; choose a new "
                           f"{option}") from None
    if old.get("identity") != record["identity"] or identity(old_inputs) != record["identity"]:
        differs = next((k for k in inputs if old_inputs.get(k) != inputs[k]), "inputs")
        was, now = _short(old_inputs.get(differs)), _short(inputs.get(differs))
        raise PacplanError(f"{option} {out} holds a certify-policy run of other inputs "
                           f"({differs} was {was}, now {now}): choose a new {option} or delete "
                           "that folder")


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _fits_matrix(entry: dict[str, Any]) -> bool:
    return entry["file"] in ("cert.npy", "test.npy")


def cost_matrix(out: Path, role: str, rows: int, m: int, inputs: dict[str, Any],
                compute: Callable[[int, int], np.ndarray],
                started: Callable[[int], None] | None = None) -> Path:
    """costs/<role>.npy, from its finished chunks and `compute(start, stop)` for the rest
    (rows start … stop−1); `started(done_rows)` is told how many rows were already done."""
    folder = out / COSTS
    folder.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(folder, "file", _fits_matrix, "cost matrix")
    name = f"{role}.npy"
    if ledger.read(name) is not None:  # finished and unchanged
        if started is not None:
            started(rows)
        return folder / name
    store = ChunkStore(folder / f"{role}.chunks", {**inputs, "role": role})
    grid = [(slice(s, min(s + CHUNK_ROWS, rows)), slice(0, m)) for s in range(0, rows, CHUNK_ROWS)]
    done = store.done(grid)
    if started is not None:
        started(sum(s.stop - s.start for s, _ in grid if (s.start, 0) in done))
    for s, _ in grid:
        if (s.start, 0) not in done:
            store.save((s.start, 0), compute(s.start, s.stop))
    matrix = store.assemble(grid, (rows, m))
    ledger.write(name, npy_bytes(matrix), rows=rows)
    store.remove()
    return folder / name
