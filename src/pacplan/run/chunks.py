"""The chunk store: the finished pieces of a cost matrix, so a killed run loses no finished work.

Each chunk is an atomic .npy; its folder is stamped with the identity of the inputs, and every
chunk is listed with its sha256 and shape in ledger.jsonl, so resumed work is trusted only as
far as it is checked.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.files import (
    append_json_line,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    npy_bytes,
    sha256_bytes,
)
from pacplan.run.rundir import SHA256_PATTERN, Grid, identity


class ChunkStore:
    """Finished chunks of one cost matrix, one atomic .npy per (seed start, policy start).

    The folder is stamped with the identity of its inputs (inputs.json); chunks left by a run
    with other inputs (say, a baseline whose weights file changed since) are discarded.

    Each chunk is listed in ledger.jsonl with its sha256 and shape, in a line appended (and
    fsynced) after the chunk itself is written. Only listed chunks are ever read:
    - a listed chunk whose bytes differ from its sha256 is an error naming the file (delete it
      to recompute it): finished work is never silently replaced or used;
    - a listed chunk that does not fit the chunk grid (the chunk sizes changed) is recomputed;
    - any other file (a chunk whose ledger line a kill cut off, or a stray file) is ignored,
      recomputed where needed, and removed with the folder once the matrix is assembled.
    """

    STAMP = "inputs.json"
    LEDGER = "ledger.jsonl"

    def __init__(self, folder: Path, inputs: dict[str, Any]) -> None:
        self.folder = folder
        stamp = {"identity": identity(inputs), "inputs": inputs}
        path = folder / self.STAMP
        if path.is_file() and _stamp_identity(path) != stamp["identity"]:
            shutil.rmtree(folder)
        if not path.is_file():
            atomic_write_json(path, stamp)
        self.ledger = self._read_ledger()

    @classmethod
    def stamped_inputs(cls, folder: Path) -> dict[str, Any] | None:
        """The inputs a chunk folder is stamped with; None when it has no readable stamp."""
        try:
            inputs = json.loads((folder / cls.STAMP).read_text()).get("inputs")
        except (ValueError, AttributeError, OSError, RecursionError):
            return None
        return inputs if isinstance(inputs, dict) else None

    @staticmethod
    def chunk_name(key: tuple[int, int]) -> str:
        """The file of the chunk whose first (seed, policy) indices are `key`."""
        return f"s{key[0]:09d}_t{key[1]:06d}.npy"

    def _read_ledger(self) -> dict[str, dict[str, Any]]:
        """Chunk name -> {sha256, shape}; a line cut short by a kill is dropped (and so is the
        ledger's tail, rewritten whole, so that later lines start on a line of their own)."""
        path = self.folder / self.LEDGER
        if not path.is_file():
            return {}
        text = path.read_bytes().decode("utf-8", errors="replace")
        ledger, clean = {}, text.endswith("\n") or not text
        for line in text.splitlines():
            entry = _ledger_entry(line)
            if entry is None:
                clean = False
            else:
                ledger[entry["chunk"]] = entry
        if not clean:
            atomic_write_text(path, "".join(json.dumps(e) + "\n" for e in ledger.values()))
        return ledger

    def done(self, grid: Grid) -> set[tuple[int, int]]:
        """The keys of `grid` whose chunk is finished, each checked against its sha256."""
        keys = set()
        for s, t in grid:
            key, shape = (s.start, t.start), [s.stop - s.start, t.stop - t.start]
            entry = self.ledger.get(self.chunk_name(key))
            if entry is None or entry["shape"] != shape:
                continue
            path = self.folder / self.chunk_name(key)
            if path.is_file():  # a deleted chunk is recomputed
                self._checked_bytes(path, entry)
                keys.add(key)
        return keys

    def save(self, key: tuple[int, int], block: np.ndarray) -> None:
        """Write the chunk atomically, then list it in the ledger."""
        data = npy_bytes(block)
        atomic_write_bytes(self.folder / self.chunk_name(key), data)
        entry = {"chunk": self.chunk_name(key), "sha256": sha256_bytes(data),
                 "shape": [int(n) for n in np.shape(block)]}
        append_json_line(self.folder / self.LEDGER, entry)
        self.ledger[entry["chunk"]] = entry

    def assemble(self, grid: Grid, shape: tuple[int, int]) -> np.ndarray:
        """The full matrix from the chunks of `grid`, each checked as it is read."""
        out = np.empty(shape, dtype=np.float64)
        for s, t in grid:
            name = self.chunk_name((s.start, t.start))
            entry = self.ledger.get(name)
            path = self.folder / name
            if entry is None or not path.is_file():
                raise PacplanError(f"{path}: chunk missing after all chunks ran; rerun to "
                                   "compute it")
            block = self._read_block(path, entry)
            want = (s.stop - s.start, t.stop - t.start)
            if block.shape != want:
                raise PacplanError(f"{path}: chunk has shape {block.shape}, expected {want} "
                                   "(its ledger entry was edited); delete it to recompute it")
            out[s, t] = block
        return out

    def _checked_bytes(self, path: Path, entry: dict[str, Any]) -> bytes:
        data = path.read_bytes()
        actual = sha256_bytes(data)
        if actual != entry["sha256"]:
            raise PacplanError(f"{path}: finished chunk has changed or is corrupted (sha256 "
                               f"{actual[:12]}… ≠ recorded {entry['sha256'][:12]}… in "
                               f"{self.LEDGER}); delete it to recompute it")
        return data

    def _read_block(self, path: Path, entry: dict[str, Any]) -> np.ndarray:
        data = self._checked_bytes(path, entry)
        try:
            return np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise PacplanError(f"{path}: unreadable chunk ({exc}); delete it to recompute "
                               "it") from None

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


_CHUNK = re.compile(r"s\d{9}_t\d{6}\.npy")


def _ledger_entry(line: str) -> dict[str, Any] | None:
    """One ledger line as {chunk, sha256, shape}, or None if it is not one."""
    try:
        entry = json.loads(line)
    except (ValueError, RecursionError):
        return None
    ok = (isinstance(entry, dict) and isinstance(entry.get("chunk"), str)
          and _CHUNK.fullmatch(entry["chunk"]) is not None
          and isinstance(entry.get("sha256"), str) and SHA256_PATTERN.fullmatch(entry["sha256"])
          and isinstance(entry.get("shape"), list) and len(entry["shape"]) == 2
          and all(isinstance(n, int) and not isinstance(n, bool) for n in entry["shape"]))
    return entry if ok else None


def _stamp_identity(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("identity")
    except (ValueError, AttributeError, OSError, RecursionError):
        return None
