"""The run directory: every file name, the manifest, the chunk store and one input identity.

Nothing else in pacplan spells a run directory's file names. Every artifact (prior, policies,
cost matrices) is recorded in manifest.json once finished, with its sha256 and the inputs it was
made from; before a resumed run uses an artifact its hash is checked, so a changed or corrupted
file is named, never silently reused or silently recomputed. "Were these the same inputs?" is
always answered by `identity` (sha256 of canonical JSON): for the frozen config, the ES
fingerprint and the stamp of a chunk folder alike.

    <run>/
      config.yaml  manifest.json  prior.safetensors  es_state.safetensors  es_state.json
      metrics.jsonl  policies.npy  costs/<role>.npy  costs/<role>.chunks/  certificates/N<n>.json
      certificate.json  report.md  figures/  timings.json
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.es.checkpoint import CheckpointFiles
from pacplan.files import (
    atomic_save_npy,
    atomic_write_json,
    atomic_write_text,
    load_npy,
    sha256_file,
)


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

    def save_timings(self, seconds: dict[str, float]) -> None:
        """Append this invocation's step times (a resumed step shows only its remaining work)."""
        path = self / self.TIMINGS
        history = json.loads(path.read_text()) if path.is_file() else []
        history.append({"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                        "seconds": seconds})
        atomic_write_json(path, history)


class Manifest:
    """sha256 and provenance of a run directory's artifacts, kept in manifest.json."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / RunDir.MANIFEST
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            try:
                self.entries = json.loads(self.path.read_text())
            except json.JSONDecodeError as exc:
                raise PacplanError(f"{self.path}: corrupted manifest ({exc})") from None

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


class ChunkStore:
    """Finished chunks of one cost matrix, one atomic .npy per (seed start, policy start).

    The folder is stamped with the identity of its inputs (inputs.json); chunks left by a run
    with other inputs (say, a baseline whose weights file changed since) are discarded.
    """

    STAMP = "inputs.json"

    def __init__(self, folder: Path, inputs: dict[str, Any]) -> None:
        self.folder = folder
        stamp = {"identity": identity(inputs), "inputs": inputs}
        path = folder / self.STAMP
        if path.is_file() and _stamp_identity(path) != stamp["identity"]:
            shutil.rmtree(folder)
        if not path.is_file():
            atomic_write_json(path, stamp)

    @staticmethod
    def _name(key: tuple[int, int]) -> str:
        return f"s{key[0]:09d}_t{key[1]:06d}.npy"

    def done(self) -> set[tuple[int, int]]:
        if not self.folder.is_dir():
            return set()
        keys = set()
        for f in self.folder.glob("s*_t*.npy"):
            s, t = f.stem[1:].split("_t")
            keys.add((int(s), int(t)))
        return keys

    def save(self, key: tuple[int, int], block: np.ndarray) -> None:
        atomic_save_npy(self.folder / self._name(key), block)

    def assemble(self, shape: tuple[int, int]) -> np.ndarray:
        out = np.full(shape, np.nan)
        for s, t in self.done():
            block = load_npy(self.folder / self._name((s, t)))
            out[s : s + block.shape[0], t : t + block.shape[1]] = block
        return out

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _stamp_identity(path: Path) -> str | None:
    try:
        return json.loads(path.read_text()).get("identity")
    except (json.JSONDecodeError, AttributeError, OSError):
        return None

