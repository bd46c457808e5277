"""A run's finished leading certification rows, from its matrix or, while it still computes,
from its chunk folder: what staged runs share (scripts/carry_rows.py) and what a machine can
recompute to check it gives the same bits (scripts/recheck_rows.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pacplan.config import RunConfig, config_to_dict, load_config
from pacplan.errors import PacplanError
from pacplan.io.files import load_npy
from pacplan.pacbayes.matrices import matrix_from_bytes
from pacplan.pipeline.execution.chunks import ChunkStore
from pacplan.pipeline.execution.executors import chunk_grid
from pacplan.pipeline.pipeline import cost_inputs
from pacplan.pipeline.rundir import Manifest, RunDir


def cert_role_rows(cfg: dict[str, Any]) -> int:
    """How many rows a run's costs/cert holds (every policy): a screened run's screening rows,
    else its largest N."""
    screen = cfg["certificate"].get("screen")
    return int(screen["rows"]) if screen else max(cfg["certificate"]["n"] or [1])


def leading_cert_rows(rd: RunDir) -> np.ndarray:
    """The run's certification rows from the first: its finished matrix, or else as many
    leading rows as its chunk folder holds for every policy (each chunk checked against the
    ledger's sha256). Refuses a run with neither, naming it."""
    cfg = config_to_dict(load_config(rd / RunDir.CONFIG))
    # a rational run (storage.cost_denominator) stores numerators when finished; its chunks
    # hold the costs as computed, like any run's
    name = RunDir.costs("cert", cfg["storage"]["cost_denominator"] is not None)
    n = cert_role_rows(cfg)
    manifest = Manifest(rd.path)
    data = manifest.read_finished(name)
    if data is not None:
        return matrix_from_bytes(data, f"{name} in {rd.path}")[:n]
    policies_sha = manifest.sha(RunDir.POLICIES)
    first = cfg["seeds"]["cert"][0]
    inputs = (None if policies_sha is None
              else cost_inputs(policies_sha, cfg["world"], np.arange(first, first + n)))
    if inputs is None or ChunkStore.stamped_inputs(rd.chunks("cert")) != inputs:
        raise PacplanError(f"{rd.path} has neither a finished {name} nor certification chunks "
                           "of its own inputs")
    manifest.check(RunDir.POLICIES)  # drawn again if a shipped run left it out
    rows = _leading_chunk_rows(rd, "cert", inputs, n, len(load_npy(rd / RunDir.POLICIES)),
                               cfg["executor"])
    if rows is None:
        raise PacplanError(f"{rd.path} has no finished certification rows yet")
    return rows


def kept_rows_beyond_screen(rd: RunDir, config: RunConfig, columns: list[int]
                            ) -> np.ndarray | None:
    """A screened run's kept policies (`columns`) on its certification rows past the screening
    rows: its finished costs/cert-rest or, while it still computes, the leading rows its chunk
    folder holds whole; None before it has any. `config` is the run's own, as loaded."""
    cfg = config_to_dict(config)
    screen, n = cfg["certificate"].get("screen"), max(cfg["certificate"]["n"] or [1])
    if not screen or n <= screen["rows"]:
        return None
    name = RunDir.costs("cert-rest", cfg["storage"]["cost_denominator"] is not None)
    manifest = Manifest(rd.path)
    data = manifest.read_finished(name)
    if data is not None:
        return matrix_from_bytes(data, f"{name} in {rd.path}")
    policies_sha = manifest.sha(RunDir.POLICIES)
    if policies_sha is None:
        return None
    first = cfg["seeds"]["cert"][0]
    seeds = np.arange(first + screen["rows"], first + n)
    inputs = cost_inputs(policies_sha, cfg["world"], seeds, columns)
    return _leading_chunk_rows(rd, "cert-rest", inputs, len(seeds), len(columns),
                               cfg["executor"])


def _leading_chunk_rows(rd: RunDir, role: str, inputs: dict[str, Any], n: int, m: int,
                        executor: dict[str, Any]) -> np.ndarray | None:
    """The leading rows a role's chunk folder holds for all m columns, each chunk checked
    against the ledger's sha256; None when it holds none, or is stamped with other inputs
    (left untouched: a ChunkStore opened on other inputs would clear it)."""
    folder = rd.chunks(role)
    if ChunkStore.stamped_inputs(folder) != inputs:
        return None
    store = ChunkStore(folder, inputs)
    grid = chunk_grid(n, m, executor["chunk_seeds"], executor["chunk_policies"])
    done = store.done(grid)
    rows = 0  # the end of the leading row blocks whose every chunk is finished
    for s, t in grid:  # row-major: a row block's chunks are consecutive, in row order
        if (s.start, t.start) not in done:
            break
        if t.stop == m:
            rows = s.stop
    if rows == 0:
        return None
    return store.assemble([(s, t) for s, t in grid if s.stop <= rows], (rows, m))
