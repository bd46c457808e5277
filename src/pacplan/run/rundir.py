"""The run directory's manifest: sha256 of every finished artifact and what it was made from.

Each artifact (prior, policies, cost matrices) is recorded once finished, with the hashes of
the artifacts it was computed from. Before a resumed run uses an artifact, its hash is checked:
a changed or corrupted file is named, never silently reused or silently recomputed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.pacbayes.matrices import sha256_file

MANIFEST = "manifest.json"


def atomic_save_npy(path: Path, array: np.ndarray) -> None:
    """Write .npy through a temporary file and os.replace: a kill leaves old or new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as fh:
        np.save(fh, array, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_npy(path: Path) -> np.ndarray:
    """Read a plain numeric .npy (never a pickle)."""
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise PacplanError(f"{path}: unreadable array ({exc})") from None


class Manifest:
    """sha256 and provenance of a run directory's artifacts, kept in manifest.json."""

    def __init__(self, run_dir: Path):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / MANIFEST
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            try:
                self.entries = json.loads(self.path.read_text())
            except json.JSONDecodeError as exc:
                raise PacplanError(f"{self.path}: corrupted manifest ({exc})") from None

    def _save(self) -> None:
        tmp = self.path.with_name(f".{MANIFEST}.tmp{os.getpid()}")
        tmp.write_text(json.dumps(self.entries, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.path)

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
                raise PacplanError(f"{name} is recorded in {MANIFEST} but missing from "
                                   f"{self.run_dir}; delete the run directory to start over")
            return False
        if entry is None:
            return False
        actual = sha256_file(path)
        if actual != entry["sha256"]:
            raise PacplanError(f"{name} in {self.run_dir} has changed or is corrupted (sha256 "
                               f"{actual[:12]}… ≠ recorded {entry['sha256'][:12]}…)")
        for key, value in inputs.items():
            if entry["inputs"].get(key) != value:
                raise PacplanError(f"{name} in {self.run_dir} was made from a different {key} "
                                   f"than this run uses; use a new --out directory")
        return True
