"""Output paths that would destroy something: refused before anything is read or written.

One rule for every command that writes (`certify-matrix --out`, `render --out`, `monitor --plot`,
`export --out`, `run --out`, `train-prior --out`, `data paper --cache`, `data minitaur-prior
OUT`):

- an output that is one of the command's inputs is refused: `monitor P costs.csv --plot
  costs.csv` would replace the cost log with a PNG (a hard link or another spelling of the same
  path is the same file); so is one inside an input folder or one holding an input (`export
  runs/x --out .`), except a run directory resumed, whose config and prior may lie in it;
- an output that is, or lies inside, a planner directory or a run directory is refused:
  `--plot P/planner.json` replaces the planner, and even a new file there is one its
  manifest.json does not record, which `verify` and a resumed run refuse. `run` and
  `train-prior` may name a run directory itself: they resume it.

A planner directory holds planner.json and manifest.json (`pacplan export`); a run directory
holds config.yaml with manifest.json, run.lock or es_state.json (`pacplan run` or
`train-prior`, from its first step on); a
certify-policy directory holds certify-policy.json (`pacplan certify-policy`, which alone may
write there: it resumes it).

`Certificate.save` follows the same rule (its inputs: the certificate's own matrices), except
that the process holding a run or certify-policy directory's lock (`owning`) saves that
directory's own certificates there; and `data minitaur-prior` puts a run's missing
prior.safetensors back when its manifest records the paper's prior (`run.paper_priors`).

A file output (`certify-matrix --out`, `render --out`, `monitor --plot`) must also name a file:
the atomic write replaces whatever the path names, so a device (`--plot /dev/null` run as root
replaced the system's /dev/null with a PNG), a FIFO or a socket there is refused, as are a
folder, a path with no file name (`.`, `/`, an empty string: a traceback before) and a path
through a file (`costs.csv/plot.png`).
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from pacplan.errors import PacplanError

_PLANNER_FILES = ("planner.json", "manifest.json")  # pacplan_runtime.bundle.PLANNER, MANIFEST
_RUN_CONFIG = "config.yaml"  # RunDir.CONFIG
_RUN_MARKS = ("manifest.json", "run.lock", "es_state.json")
"""RunDir.MANIFEST, RunDir.LOCK, RunDir.ES_STATE_JSON: a prior still training has no manifest,
and a copy of it (a committed stage) may have no lock."""
_POLICY_RUN = "certify-policy.json"  # pacplan.policy_certification.store.MARK
RUN_WRITES = frozenset({
    "config.yaml", "manifest.json", "prior.safetensors", "es_state.safetensors",
    "es_state.json", "metrics.jsonl", "policies.npy", "certificate.json", "report.md",
    "report.html", "timings.json", "crossval", "run.lock", "figures", "tensorboard", "distill",
    "certificates", "costs"})
"""Every name a run writes at the top of its directory (RunDir's; a test keeps them in step):
a folder holding only these is a run's, however early it stopped."""


_OWNED: dict[str, int] = {}
"""Folders whose lock this process holds (`pacplan.pipeline.lock.hold`): real path -> nesting
depth."""


@contextlib.contextmanager
def owning(folder: str | Path) -> Iterator[None]:
    """Mark `folder` as this process's own work in progress while the block runs: the lock
    holder calls it, so that its own writes there are not refused as overwrites."""
    key = os.path.realpath(folder)
    _OWNED[key] = _OWNED.get(key, 0) + 1
    try:
        yield
    finally:
        _OWNED[key] -= 1
        if not _OWNED[key]:
            del _OWNED[key]


def owns(folder: str | Path) -> bool:
    """Whether this process holds `folder`'s lock (inside `owning`)."""
    return os.path.realpath(folder) in _OWNED


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (the same inode, or the same resolved path)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop; not an input then
        return False


def folder_kind(folder: str | Path) -> str | None:
    """"planner directory", "run directory" or "certify-policy directory" if `folder` is one,
    else None."""
    folder = Path(folder)
    try:
        if all((folder / name).is_file() for name in _PLANNER_FILES):
            return "planner directory"
        if (folder / _RUN_CONFIG).is_file() and any((folder / name).is_file()
                                                      for name in _RUN_MARKS):
            return "run directory"
        if (folder / _POLICY_RUN).is_file():
            return "certify-policy directory"
    except OSError:  # an unreadable folder: nothing known to protect there
        return None
    return None


def protecting_folder(out: str | Path, itself: bool = True) -> tuple[str, Path] | None:
    """(kind, folder) of the planner or run directory that `out` is inside (or is, with
    `itself`), by its path as written and with symlinks resolved; None if there is none."""
    written = Path(os.path.abspath(out))
    try:
        resolved = Path(out).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        resolved = written
    for path in dict.fromkeys((written, resolved)):
        for folder in ([path] if itself else []) + list(path.parents):
            kind = folder_kind(folder)
            if kind is not None:
                return kind, folder
    return None


def _real(path: str | Path) -> Path | None:
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None


def overlap(out: str | Path, given: str | Path) -> str | None:
    """"is inside" when `out` lies in the folder `given`, "holds" when the input `given` lies
    in the folder `out` (`--out .` above the run being exported), else None; by path as
    written and with symlinks resolved."""
    pairs = [(Path(os.path.abspath(out)), Path(os.path.abspath(given)))]
    if (a := _real(out)) is not None and (b := _real(given)) is not None:
        pairs.append((a, b))
    for o, g in pairs:
        if o != g and o.is_relative_to(g) and os.path.isdir(given):
            return "is inside"
        if o != g and g.is_relative_to(o):
            return "holds"
    return None


def refuse_non_file(out: str | Path, option: str) -> None:
    """Refuse a file output that does not name a regular file or a new one (module docstring):
    writing it atomically would replace a device or FIFO, or fail with a traceback or an
    OSError that names another path."""
    text = os.fspath(out)
    name = os.path.basename(text.rstrip(os.sep))
    if name in ("", ".", ".."):
        raise PacplanError(f"{option} {text!r} names no file: give a file path")
    try:
        mode = os.stat(text).st_mode
    except FileNotFoundError:
        mode = None
    except NotADirectoryError:
        mode = None  # a parent is a file: named below
    except OSError as exc:  # a symlink loop, no permission
        raise PacplanError(f"{option} {text}: cannot write ({exc.strerror or exc})") from None
    if mode is not None:
        if stat.S_ISDIR(mode):
            raise PacplanError(f"{option} {text} is a folder: give a file path")
        if not stat.S_ISREG(mode):
            raise PacplanError(f"{option} {text} is not a regular file (a device, FIFO or "
                               "socket); writing would replace it: give a file path")
        return
    for parent in Path(os.path.abspath(text)).parents:
        if os.path.lexists(parent):
            if not parent.is_dir():
                raise PacplanError(f"{option} {text}: {parent} is not a folder")
            return


def refuse_foreign_folder(out: str | Path, option: str) -> None:
    """A run directory to make must be new or empty, or hold only what a run writes (a run
    stopped early): a run writes config.yaml, manifest.json, costs/ … there, which would mix
    with, or replace, other files of the same names."""
    try:
        entries = [e.name for e in os.scandir(out)] if os.path.isdir(out) else None
    except OSError:
        return  # unreadable: making the run directory names the problem
    if entries is None and os.path.lexists(out):
        raise PacplanError(f"{option} {out} is a file, not a folder: give a run directory")
    foreign = sorted(set(entries or ()) - RUN_WRITES)
    if foreign:
        raise PacplanError(f"{option} {out} holds files and is not a run directory ({foreign[0]} "
                           "is not a run's): choose a new folder (or an empty one) for the run")


def refuse_overwriting(out: str | Path, option: str,
                       inputs: dict[str, str | Path | None] | None = None, *,
                       resumes: bool = False, file: bool = False, writer: bool = False) -> None:
    """Refuse an output path that is one of the command's inputs, lies in or holds one, or
    that is or lies inside a planner or run directory (module docstring); `resumes`: `out` may
    itself be a run directory (run and train-prior resume it), else it must be new or empty;
    `file`: `out` is a file to write, so it must not be a folder, device or FIFO
    (`refuse_non_file`, after the rules above, whose message says more); `writer`: a run or
    certify-policy directory whose lock this process holds (`owning`) is its own work in
    progress (a run saving its certificates), not a thing to protect."""
    for name, path in (inputs or {}).items():
        if path is not None and same_file(out, path):
            raise PacplanError(f"{option} {out} is the input {name}; writing there would "
                               "destroy it: choose another output path")
    found = protecting_folder(out)
    if found is not None and writer and found[0] != "planner directory" and owns(found[1]):
        found = None
    if found is None:
        for name, path in (inputs or {}).items():
            where = overlap(out, path) if path is not None else None
            if where is not None and not (file and where == "holds"):  # a folder: said below
                raise PacplanError(f"{option} {out} {where} the input {name} ({path}); writing "
                                   "there could change or destroy it: choose a path apart "
                                   "from it")
        if file:
            refuse_non_file(out, option)
        if resumes:
            refuse_foreign_folder(out, option)
        return
    kind, folder = found
    if resumes and kind == "run directory" and same_file(folder, out):
        inside = protecting_folder(out, itself=False)
        if inside is None:
            return
        kind, folder = inside
    where = f"is a {kind}" if same_file(folder, out) else f"is inside the {kind} {folder}"
    whose = ", whose manifest.json records every file" if kind != "certify-policy directory" \
        else ""
    raise PacplanError(f"{option} {out} {where}{whose}; writing there would change or destroy "
                       "it: choose a path outside it")
