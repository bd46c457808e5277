"""The run directory: every file name, the manifest, the chunk store, the lock and one input
identity.

Nothing else in pacplan spells a run directory's file names. Every artifact (prior, policies,
cost matrices) is recorded in manifest.json once finished, with its sha256 and the inputs it was
made from; before a resumed run uses an artifact its hash is checked, so a changed or corrupted
file is named, never silently reused or silently recomputed. Work in progress is checked too:
each finished chunk of a cost matrix is listed with its sha256 and shape in its folder's
ledger.jsonl, and the ES state carries its own sha256 (`pacplan.es.checkpoint`). "Were these the
same inputs?" is always answered by `identity` (sha256 of canonical JSON): for the frozen
config, the ES fingerprint and the stamp of a chunk folder alike.

One process at a time works in a run directory: `RunDir.locked` holds an OS-level lock on
run.lock (released by the kernel when the process dies, however it dies), and a second process
is refused at once, naming the holder.

    <run>/
      config.yaml  manifest.json  prior.safetensors  es_state.safetensors  es_state.json
      metrics.jsonl  policies.npy  costs/<role>.npy  certificates/N<n>.json  certificate.json
      report.md  figures/  timings.json  run.lock
      costs/<role>.chunks/  inputs.json  ledger.jsonl  s<seed>_t<policy>.npy
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import hashlib
import io
import json
import os
import re
import shutil
import socket
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.es.checkpoint import CheckpointFiles
from pacplan.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    sha256_bytes,
    sha256_file,
)

Grid = Sequence[tuple[slice, slice]]
"""A cost matrix's chunk grid (`pacplan.run.executors.chunk_grid`): (seed slice, policy slice)."""


def identity(obj: Any) -> str:
    """sha256 of `obj` as canonical JSON (sorted keys): equal inputs, equal identity."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True).encode()).hexdigest()


class RunDir:
    """The paths of one run directory (creating nothing until something is written)."""

    CONFIG = "config.yaml"
    MANIFEST = "manifest.json"
    PRIOR = "prior.safetensors"
    ES_STATE = "es_state.safetensors"
    ES_STATE_JSON = "es_state.json"
    METRICS = "metrics.jsonl"
    POLICIES = "policies.npy"
    CERTIFICATE = "certificate.json"
    REPORT = "report.md"
    TIMINGS = "timings.json"
    LOCK = "run.lock"
    FIGURES = "figures"
    TRAINING_CURVE = "figures/prior_training.png"

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    @staticmethod
    def costs(role: str) -> str:
        """The manifest name of a finished cost matrix: role cert, test or baseline-<name>."""
        return f"costs/{role}.npy"

    def chunks(self, role: str) -> Path:
        return self.path / "costs" / f"{role}.chunks"

    def certificate(self, n: int) -> Path:
        return self.path / "certificates" / f"N{n}.json"

    def certificates(self) -> dict[int, Path]:
        """The certificate files by N, in increasing N."""
        folder = self.path / "certificates"
        files = folder.glob("N*.json") if folder.is_dir() else []
        return dict(sorted((int(f.stem[1:]), f) for f in files if f.stem[1:].isdigit()))

    def checkpoint_files(self) -> CheckpointFiles:
        return CheckpointFiles(state=self / self.ES_STATE, state_json=self / self.ES_STATE_JSON,
                               prior=self / self.PRIOR, metrics=self / self.METRICS)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold this directory's lock (creating the directory); re-entrant within a process,
        so `run` may train its prior through `train_prior`, which locks it too."""
        key = _lock_key(self)
        if key in _HELD:
            _HELD[key][1] += 1
        else:
            _HELD[key] = [_acquire(self), 1]
        try:
            yield
        finally:
            _HELD[key][1] -= 1
            if _HELD[key][1] == 0:
                os.close(_HELD.pop(key)[0])  # closing the file releases the lock

    def save_timings(self, seconds: dict[str, float]) -> str | None:
        """Append this invocation's step times (a resumed step shows only its remaining work).

        Timings are for people: an unreadable history is replaced, never fatal after a run's
        work. Returns a line saying so in that case.
        """
        path = self / self.TIMINGS
        history, problem = _read_timings(path)
        history.append({"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "seconds": seconds})
        atomic_write_json(path, history)
        return None if problem is None else (f"{path} was unreadable ({problem}); replaced by "
                                             "a new history")


_HELD: dict[str, list[int]] = {}
"""Locks this process holds: run.lock's real path -> [open descriptor, nesting depth]."""


def _lock_key(rd: RunDir) -> str:
    try:
        rd.path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PacplanError(f"cannot use {rd.path} as a run directory: {exc.strerror}") from None
    return os.path.realpath(rd / RunDir.LOCK)


def _acquire(rd: RunDir) -> int:
    """Lock run.lock (flock: the kernel drops it with the process) and write who holds it."""
    path = rd / RunDir.LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PacplanError(f"cannot lock {rd.path}: {exc.strerror} ({path})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise PacplanError(f"{rd.path} is in use by another pacplan process ({holder}); wait "
                           "for it to finish, or use another --out directory") from None
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                              "started": started}).encode() + b"\n", 0)
    return fd


def _holder(fd: int) -> str:
    """Who holds a lock, as written by `_acquire` (it may not have written yet)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(info['pid'])} on {info['host']}, since {info['started']}"
    except (ValueError, KeyError, TypeError, OSError):
        return "a process that is just starting"


def _read_timings(path: Path) -> tuple[list[Any], str | None]:
    """The timings history, or an empty one and why the file could not be used."""
    if not path.is_file():
        return [], None
    try:
        history = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        return [], f"{type(exc).__name__}: {exc}".replace("\n", " ")
    if not isinstance(history, list):
        return [], f"a JSON {type(history).__name__}, not a list"
    return history, None


class Manifest:
    """sha256 and provenance of a run directory's artifacts, kept in manifest.json."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / RunDir.MANIFEST
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            self.entries = _read_manifest(self.path)

    def _save(self) -> None:
        atomic_write_text(self.path, json.dumps(self.entries, indent=2, sort_keys=True) + "\n")

    def record(self, name: str, **inputs: Any) -> str:
        """Hash the finished artifact `name` (a path relative to the run dir) and store it."""
        digest = sha256_file(self.run_dir / name)
        self.entries[name] = {"sha256": digest, "inputs": inputs}
        self._save()
        return digest

    def sha(self, name: str) -> str | None:
        entry = self.entries.get(name)
        return None if entry is None else entry["sha256"]

    def inputs(self, name: str) -> dict[str, Any]:
        """What the finished artifact `name` was made from ({} if it is not recorded)."""
        entry = self.entries.get(name)
        return {} if entry is None else dict(entry["inputs"])

    def check(self, name: str, **inputs: Any) -> bool:
        """True if `name` exists, matches its recorded hash and was made from `inputs`.

        False if it does not exist yet (or was never finished). Raises, naming the artifact,
        if it was changed or corrupted, or if it was made from different inputs.
        """
        path = self.run_dir / name
        entry = self.entries.get(name)
        if not path.is_file():
            if entry is not None:
                raise PacplanError(f"{name} is recorded in {RunDir.MANIFEST} but missing from "
                                   f"{self.run_dir}; delete the run directory to start over")
            return False
        if entry is None:
            return False
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            raise PacplanError(f"{name} in {self.run_dir} has changed or is corrupted (sha256 "
                               f"{actual[:12]}… ≠ recorded {entry['sha256'][:12]}…)")
        for key, value in inputs.items():
            if identity(entry["inputs"].get(key)) != identity(value):
                raise PacplanError(f"{name} in {self.run_dir} was made from a different {key} "
                                   f"than this run uses; use a new --out directory")
        return True


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _read_manifest(path: Path) -> dict[str, dict[str, Any]]:
    """manifest.json, checked to be what `Manifest` writes: {name: {sha256, inputs}}."""
    advice = "it cannot vouch for the artifacts beside it; use a new --out directory"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        reason = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        raise PacplanError(f"{path}: corrupted manifest ({reason}); {advice}") from None
    if not isinstance(entries, dict):
        raise PacplanError(f"{path}: corrupted manifest (a JSON {type(entries).__name__}, not an "
                           f"object of artifacts); {advice}")
    for name, entry in entries.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and _SHA256.fullmatch(entry["sha256"]) and isinstance(entry.get("inputs"), dict)):
            raise PacplanError(f"{path}: corrupted manifest (the entry of {name!r} is not "
                               f"{{sha256, inputs}}); {advice}")
    return entries


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

    @staticmethod
    def _name(key: tuple[int, int]) -> str:
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
            entry = self.ledger.get(self._name(key))
            if entry is None or entry["shape"] != shape:
                continue
            path = self.folder / self._name(key)
            if path.is_file():  # a deleted chunk is recomputed
                self._checked_bytes(path, entry)
                keys.add(key)
        return keys

    def save(self, key: tuple[int, int], block: np.ndarray) -> None:
        """Write the chunk atomically, then list it in the ledger."""
        buf = io.BytesIO()
        np.save(buf, np.asarray(block), allow_pickle=False)
        data = buf.getvalue()
        atomic_write_bytes(self.folder / self._name(key), data)
        entry = {"chunk": self._name(key), "sha256": sha256_bytes(data),
                 "shape": [int(n) for n in np.shape(block)]}
        with open(self.folder / self.LEDGER, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        self.ledger[entry["chunk"]] = entry

    def assemble(self, grid: Grid, shape: tuple[int, int]) -> np.ndarray:
        """The full matrix from the chunks of `grid`, each checked as it is read."""
        out = np.empty(shape, dtype=np.float64)
        for s, t in grid:
            name = self._name((s.start, t.start))
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
    except ValueError:
        return None
    ok = (isinstance(entry, dict) and isinstance(entry.get("chunk"), str)
          and _CHUNK.fullmatch(entry["chunk"]) is not None
          and isinstance(entry.get("sha256"), str) and _SHA256.fullmatch(entry["sha256"])
          and isinstance(entry.get("shape"), list) and len(entry["shape"]) == 2
          and all(isinstance(n, int) and not isinstance(n, bool) for n in entry["shape"]))
    return entry if ok else None


def _stamp_identity(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("identity")
    except (ValueError, AttributeError, OSError):
        return None
