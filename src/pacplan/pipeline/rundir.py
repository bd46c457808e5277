"""The run directory: every file name, the manifest, the chunk store, the lock and one input
identity.

Nothing else in pacplan spells a run directory's file names. Every artifact (prior, policies,
cost matrices) is recorded in manifest.json once finished, with its sha256 and the inputs it was
made from; before a resumed run uses an artifact its hash is checked, so a changed or corrupted
file is named, never silently reused or silently recomputed. Work in progress is checked too:
each finished chunk of a cost matrix is listed with its sha256 and shape in its folder's
ledger.jsonl (`pacplan.pipeline.execution.chunks.Ledger`; the distillation's checkpoints are listed
in distill/ledger.jsonl the same way), and the ES state carries its own sha256
(`pacplan.es.checkpoint`). "Were these the same inputs?" is always answered by `identity`
(sha256 of canonical JSON): for the frozen config, the ES fingerprint and the stamp of a chunk
folder alike.

One process at a time works in a run directory: `RunDir.locked` holds an OS-level lock on
run.lock (released by the kernel when the process dies, however it dies), and a second process
is refused at once, naming the holder.

    <run>/
      config.yaml  manifest.json  prior.safetensors  es_state.safetensors  es_state.json
      metrics.jsonl  policies.npy  costs/<role>.npy  certificates/N<n>.json  certificate.json
      report.md  figures/  timings.json  run.lock  tensorboard/ (a view of metrics.jsonl)
      costs/<role>.chunks/  inputs.json  ledger.jsonl  s<seed>_t<policy>.npy
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.es.checkpoint import CheckpointFiles, read_prior
from pacplan.es.draws import draw_policies
from pacplan.io.files import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    npy_bytes,
    npy_from_bytes,
    read_file_bytes,
    sha256_bytes,
    sha256_file,
)
from pacplan.io.paperdata import missing_minitaur_prior
from pacplan.pacbayes.matrices import RATIONAL_SUFFIX

Grid = Sequence[tuple[slice, slice]]
"""A cost matrix's chunk grid (`pacplan.pipeline.execution.executors.chunk_grid`): (seed slice,
policy slice)."""


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
    REPORT_HTML = "report.html"  # the same report as one page, figures embedded
    TIMINGS = "timings.json"
    CROSSVAL = "crossval"  # <engine>.json: the posterior replayed in another engine (people only)
    LOCK = "run.lock"
    FIGURES = "figures"
    TRAINING_CURVE = "figures/prior_training.png"
    TENSORBOARD = "tensorboard"  # ES scalars from metrics.jsonl (prior.tensorboard)

    def __init__(self, path: str | Path, option: str = "--out") -> None:
        self.path = Path(path)
        self.option = option
        """How the caller names the run directory in a message ('--out' or Python's 'out')."""

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    @staticmethod
    def costs(role: str, rational: bool = False) -> str:
        """The manifest name of a finished cost matrix: role cert, test or baseline-<name>;
        `rational` (config `storage.cost_denominator`) stores numerators and a denominator."""
        return f"costs/{role}{RATIONAL_SUFFIX if rational else '.npy'}"

    @staticmethod
    def cert_role(columns: list[int] | None) -> str:
        """The role of the matrix a certificate's cert_matrix names: cert, or for a screened
        certificate (its `columns`) cert-screened."""
        return "cert" if columns is None else "cert-screened"

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

    WRITTEN = ("figures", "certificates", "costs", "distill", "crossval", "tensorboard")
    """The folders a run or report writes into (a link here sends those writes elsewhere)."""

    def locked(self) -> contextlib.AbstractContextManager[None]:
        """Hold this directory's lock (`pacplan.pipeline.lock`); re-entrant within a process. Every
        writer takes it, so its folders are checked first (`refuse_linked_folders`)."""
        from pacplan.pipeline.lock import hold

        self.refuse_linked_folders()
        return hold(self.path, self / self.LOCK, self.option)

    def refuse_linked_folders(self) -> None:
        """Refuse a folder of `WRITTEN` that is a link into a planner or another run directory
        (the report wrote its PNGs into the planner a `figures` link named, which then no
        longer loaded), or a `figures` that leaves the run at all (the report embeds its
        figures from inside the run, and failed only after writing them). A link elsewhere
        (costs/ on a larger disk) is the user's choice and kept."""
        from pacplan.io.outputs import protecting_folder

        try:
            own = self.path.resolve()
        except (OSError, RuntimeError):  # a symlink loop: the lock names it
            return
        for name in self.WRITTEN:
            folder = self.path / name
            if not folder.is_symlink():
                continue
            try:
                target = folder.resolve(strict=False)
            except (OSError, RuntimeError):
                raise PacplanError(f"{folder} is a symbolic link that does not resolve (a loop); "
                                   "remove it") from None
            if target == own or target.is_relative_to(own):
                continue
            found = protecting_folder(target)
            if found is not None:
                raise PacplanError(f"{folder} is a link into the {found[0]} {found[1]}; writing "
                                   "there would change or destroy it: remove the link")
            if name == self.FIGURES:
                raise PacplanError(f"{folder} is a link to {target}, outside the run directory: "
                                   "the report embeds its figures from inside it; remove the "
                                   "link")

    def save_timings(self, seconds: dict[str, float], rollouts: dict[str, int] | None = None,
                     cpu_seconds: dict[str, float] | None = None,
                     interrupted: bool = False, error: str | None = None) -> str | None:
        """Append this invocation's step times (a resumed step shows only its remaining work)
        and, per cost step, the rollouts it computed (chunks kept from before are not counted,
        so seconds / rollouts is the rate at which this machine computed them) and the CPU
        seconds they took in the processes that computed them. An interrupted
        invocation is recorded too, marked so, and one stopped by an error with its message:
        its finished chunks count towards the run.

        Timings are for people: an unreadable history is replaced, never fatal after a run's
        work. Returns a line saying so in that case.
        """
        path = self / self.TIMINGS
        history, problem = read_timings(path)
        entry: dict[str, Any] = {"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                 "seconds": seconds}
        if rollouts is not None:
            entry["rollouts"] = rollouts
        if cpu_seconds is not None:
            entry["cpu_seconds"] = {k: round(v, 3) for k, v in cpu_seconds.items()}
        if interrupted:
            entry["interrupted"] = True
        if error is not None:
            entry["error"] = error
        history.append(entry)
        atomic_write_json(path, history)
        return None if problem is None else (f"{path} was unreadable ({problem}); replaced by "
                                             "a new history")


def read_timings(path: Path) -> tuple[list[Any], str | None]:
    """The timings history, or an empty one and why the file could not be used."""
    if not path.is_file():
        return [], None
    try:
        history = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError, RecursionError) as exc:
        return [], f"{type(exc).__name__}: {exc}".replace("\n", " ")
    if not isinstance(history, list):
        return [], f"a JSON {type(history).__name__}, not a list"
    return history, None


def timing_raw(entry: Any, field: str, step: str) -> Any:
    """entry[field][step] of a timings history entry as written, None where absent."""
    block = entry.get(field) if isinstance(entry, dict) else None
    return block.get(step) if isinstance(block, dict) else None


def timing_number(entry: Any, field: str, step: str) -> float | None:
    """entry[field][step] of a timings history entry ("seconds", "rollouts" or "cpu_seconds",
    per step) when it is a finite number ≥ 0; anything else is None (timings are for people
    and may be damaged, so every reader takes them through this one check)."""
    value = timing_raw(entry, field, step)
    ok = (isinstance(value, int | float) and not isinstance(value, bool)
          and math.isfinite(value) and value >= 0)
    return float(value) if ok else None


class Manifest:
    """sha256 and provenance of a run directory's artifacts, kept in manifest.json."""

    def __init__(self, run_dir: str | Path, option: str = "--out") -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / RunDir.MANIFEST
        self.option = option  # how the caller names the run directory (`RunDir.option`)
        self.entries: dict[str, dict[str, Any]] = {}
        if self.path.is_file():
            self.entries = _read_manifest(self.path, option)

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

    def checked_path(self, name: str) -> Path | None:
        """The path of finished artifact `name` once its sha256 matches (None if the run has
        none); a file present but never recorded is refused: its content is unchecked."""
        return None if self.read_finished(name) is None else self.run_dir / name

    def read_finished(self, name: str) -> bytes | None:
        """`checked_path`'s contract, returning the bytes that were hashed, so what is checked is
        exactly what is used (a file swapped after the check is never read unhashed)."""
        data = self.read_checked(name)
        if data is None and (self.run_dir / name).is_file():
            raise PacplanError(f"{name} in {self.run_dir} is not recorded in {RunDir.MANIFEST}, "
                               "so its content is unchecked; rerun `pacplan run` to finish the run")
        return data

    def check(self, name: str, **inputs: Any) -> bool:
        """True if `name` exists, matches its recorded hash and was made from `inputs`.

        False if it does not exist yet (or was never finished). Raises, naming the artifact,
        if it was changed or corrupted, or if it was made from different inputs.
        """
        return self.read_checked(name, **inputs) is not None

    def read_checked(self, name: str, **inputs: Any) -> bytes | None:
        """`check`, returning the bytes it hashed (read once) instead of True, None for False."""
        path = self.run_dir / name
        entry = self.entries.get(name)
        if not path.is_file():
            drawn = (self._redraw_policies(entry) if entry is not None
                     and name == RunDir.POLICIES else None)
            if drawn is not None:
                self._check_inputs(name, entry, inputs)  # type: ignore[arg-type]
                return drawn
            if entry is not None:
                raise PacplanError(missing_minitaur_prior(path, entry["sha256"])
                                   or f"{name} is recorded in {RunDir.MANIFEST} but missing "
                                   f"from {self.run_dir}; delete the run directory to start over")
            return None
        if entry is None:
            return None
        data = read_file_bytes(path, f"{name} in {self.run_dir}")
        actual = sha256_bytes(data)
        if actual != entry["sha256"]:
            raise PacplanError(f"{name} in {self.run_dir} has changed or is corrupted (sha256 "
                               f"{actual[:12]}… ≠ recorded {entry['sha256'][:12]}…)")
        self._check_inputs(name, entry, inputs)
        return data

    def _check_inputs(self, name: str, entry: dict[str, Any], inputs: dict[str, Any]) -> None:
        for key, value in inputs.items():
            if identity(entry["inputs"].get(key)) != identity(value):
                raise PacplanError(f"{name} in {self.run_dir} was made from a different {key} "
                                   f"than this run uses; use a new {self.option} directory")

    def _redraw_policies(self, entry: dict[str, Any]) -> bytes | None:
        """policies.npy drawn again from the run's checked prior, m and seed (a shipped run
        leaves the draws out: `pacplan.es.draws`), if its bytes have the recorded sha256, and
        written back where the folder is writable. None when the manifest does not say how it
        was drawn."""
        drawn = entry.get("inputs") or {}
        m, seed = drawn.get("m"), drawn.get("seed")
        if not (isinstance(m, int) and isinstance(seed, int) and m > 0
                and drawn.get("prior") == self.sha(RunDir.PRIOR)):
            return None
        prior_bytes = self.read_checked(RunDir.PRIOR)
        if prior_bytes is None:  # unrecorded: nothing vouches for it
            return None
        prior = read_prior(prior_bytes, str(self.run_dir / RunDir.PRIOR))  # the bytes checked
        data = npy_bytes(draw_policies(prior.mu, prior.logvar, m, seed))
        if sha256_bytes(data) != entry["sha256"]:
            raise PacplanError(f"{self.run_dir / RunDir.POLICIES} is missing, and drawn again "
                               f"from {RunDir.PRIOR} (m = {m}, seed {seed}) its sha256 is not "
                               f"the recorded {entry['sha256'][:12]}…: the run cannot be "
                               "checked without the file")
        with contextlib.suppress(OSError):  # a read-only folder: the bytes serve this command
            atomic_write_bytes(self.run_dir / RunDir.POLICIES, data)
        return data


def checked_policies(run: str | Path) -> np.ndarray:
    """A run's m policies as its manifest vouches for them (drawn again from its prior and
    seed when a shipped run leaves policies.npy out)."""
    data = Manifest(Path(run)).read_finished(RunDir.POLICIES)
    if data is None:
        raise PacplanError(f"{run} has no finished {RunDir.POLICIES}")
    return npy_from_bytes(data, f"{RunDir.POLICIES} in {run}")


SHA256_PATTERN = re.compile(r"[0-9a-f]{64}")


def _read_manifest(path: Path, option: str) -> dict[str, dict[str, Any]]:
    """manifest.json, checked to be what `Manifest` writes: {name: {sha256, inputs}}."""
    advice = f"it cannot vouch for the artifacts beside it; use a new {option} directory"
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError, RecursionError) as exc:  # RecursionError: nested too deep
        reason = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        raise PacplanError(f"{path}: corrupted manifest ({reason}); {advice}") from None
    if not isinstance(entries, dict):
        raise PacplanError(f"{path}: corrupted manifest (a JSON {type(entries).__name__}, not an "
                           f"object of artifacts); {advice}")
    for name, entry in entries.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and SHA256_PATTERN.fullmatch(entry["sha256"])
                and isinstance(entry.get("inputs"), dict)):
            raise PacplanError(f"{path}: corrupted manifest (the entry of {name!r} is not "
                               f"{{sha256, inputs}}); {advice}")
    return entries


