"""The chunk store: the finished pieces of a cost matrix, so a killed run loses no finished work.

Each chunk is an atomic .npy; its folder is stamped with the identity of the inputs, and every
chunk is listed with its sha256 and shape in ledger.jsonl, so resumed work is trusted only as
far as it is checked. The ledger (`Ledger`) is the one record of the hashes of work in progress:
the distillation stage's checkpoints (`pacplan.pipeline.prior.distill`) are listed in one too.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.files import (
    append_json_line,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    npy_bytes,
    read_file_bytes,
    sha256_bytes,
)
from pacplan.pipeline.rundir import SHA256_PATTERN, Grid, identity
from pacplan.validation import is_int


class Ledger:
    """The sha256 of each finished file of one folder, one JSON line each in its ledger.jsonl.

    A file is written atomically, then listed in a line appended (and fsynced) after it, so a
    kill leaves a whole listed file, or an unlisted one, never a listed half. Only listed files
    are ever read, each checked against its sha256 as it is read: a listed file whose bytes
    differ (an edit, a damaged disk) is an error naming it (delete it to recompute it), never
    used; an unlisted one (its line cut off by a kill, a stray file) is the caller's to
    recompute. A line cut short by a kill is dropped.

    `key` is the entry's field naming the file (relative to the folder), `fits` checks an
    entry's fields (the name included; sha256 is checked here) and `what` is what an error
    calls the file ("chunk").
    """

    NAME = "ledger.jsonl"

    def __init__(self, folder: Path, key: str, fits: Callable[[dict[str, Any]], bool],
                 what: str) -> None:
        self.folder, self.key, self.what = folder, key, what
        self._fits = fits
        self.entries = self._read()

    def _read(self) -> dict[str, dict[str, Any]]:
        """File name -> entry; a line cut short by a kill is dropped (and so is the ledger's
        tail, rewritten whole, so that later lines start on a line of their own)."""
        path = self.folder / self.NAME
        if not path.is_file():
            return {}
        text = path.read_bytes().decode("utf-8", errors="replace")
        entries, clean = {}, text.endswith("\n") or not text
        for line in text.splitlines():
            entry = self._entry(line)
            if entry is None:
                clean = False
            else:
                entries[entry[self.key]] = entry
        if not clean:
            atomic_write_text(path, "".join(json.dumps(e) + "\n" for e in entries.values()))
        return entries

    def _entry(self, line: str) -> dict[str, Any] | None:
        """One ledger line as an entry, or None if it is not one."""
        try:
            entry = json.loads(line)
        except (ValueError, RecursionError):
            return None
        ok = (isinstance(entry, dict) and isinstance(entry.get(self.key), str)
              and isinstance(entry.get("sha256"), str)
              and SHA256_PATTERN.fullmatch(entry["sha256"]) is not None and self._fits(entry))
        return entry if ok else None

    def write(self, name: str, data: bytes, **fields: Any) -> None:
        """Write file `name` atomically, then list it."""
        atomic_write_bytes(self.folder / name, data)
        self.record(name, sha256_bytes(data), **fields)

    def record(self, name: str, sha256: str, **fields: Any) -> None:
        """List file `name`, already written whole (by another process, say) with this sha256."""
        entry = {self.key: name, "sha256": sha256, **fields}
        append_json_line(self.folder / self.NAME, entry)
        self.entries[name] = entry

    def read(self, name: str) -> bytes | None:
        """The bytes of listed file `name`, checked; None when it is unlisted or its file is
        gone (deleted to be recomputed)."""
        if name not in self.entries or not (self.folder / name).is_file():
            return None
        return self.checked(name)

    def checked(self, name: str) -> bytes:
        """The bytes of listed file `name`, read once and checked against its sha256."""
        path, entry = self.folder / name, self.entries[name]
        data = read_file_bytes(path)
        actual = sha256_bytes(data)
        if actual != entry["sha256"]:
            raise PacplanError(f"{path}: finished {self.what} has changed or is corrupted (sha256 "
                               f"{actual[:12]}… ≠ recorded {entry['sha256'][:12]}… in "
                               f"{self.NAME}); delete it to recompute it")
        return data


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
    LEDGER = Ledger.NAME

    def __init__(self, folder: Path, inputs: dict[str, Any]) -> None:
        self.folder = folder
        stamp = {"identity": identity(inputs), "inputs": inputs}
        path = folder / self.STAMP
        if path.is_file() and _stamp_identity(path) != stamp["identity"]:
            shutil.rmtree(folder)
        if not path.is_file():
            atomic_write_json(path, stamp)
        self.files = Ledger(folder, "chunk", _fits_chunk, "chunk")

    @property
    def ledger(self) -> dict[str, dict[str, Any]]:
        """Chunk name -> {chunk, sha256, shape}: the listed chunks."""
        return self.files.entries

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
                self.files.checked(path.name)
                keys.add(key)
        return keys

    def save(self, key: tuple[int, int], block: np.ndarray) -> None:
        """Write the chunk atomically, then list it in the ledger."""
        self.files.write(self.chunk_name(key), npy_bytes(block),
                         shape=[int(n) for n in np.shape(block)])

    def assemble(self, grid: Grid, shape: tuple[int, int]) -> np.ndarray:
        """The full matrix from the chunks of `grid`, each checked as it is read."""
        out = np.empty(shape, dtype=np.float64)
        for s, t in grid:
            out[s, t] = self.block(s, t)
        return out

    def block(self, s: slice, t: slice) -> np.ndarray:
        """The finished chunk of rows `s` and columns `t`, checked as it is read."""
        name = self.chunk_name((s.start, t.start))
        path = self.folder / name
        if name not in self.ledger or not path.is_file():
            raise PacplanError(f"{path}: chunk missing after all chunks ran; rerun to "
                               "compute it")
        block = self._read_block(path)
        want = (s.stop - s.start, t.stop - t.start)
        if block.shape != want:
            raise PacplanError(f"{path}: chunk has shape {block.shape}, expected {want} "
                               "(its ledger entry was edited); delete it to recompute it")
        return block

    def _read_block(self, path: Path) -> np.ndarray:
        data = self.files.checked(path.name)
        try:
            return np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise PacplanError(f"{path}: unreadable chunk ({exc}); delete it to recompute "
                               "it") from None

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


_CHUNK = re.compile(r"s\d{9}_t\d{6}\.npy")


def _fits_chunk(entry: dict[str, Any]) -> bool:
    """A chunk's ledger entry names a chunk file and its 2-D shape."""
    shape = entry.get("shape")
    return (_CHUNK.fullmatch(entry["chunk"]) is not None and isinstance(shape, list)
            and len(shape) == 2
            and all(is_int(n) for n in shape))


def _stamp_identity(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("identity")
    except (ValueError, AttributeError, OSError, RecursionError):
        return None
