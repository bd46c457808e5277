"""The output folder of `pacplan export`: new or empty, written whole or not at all, and
sealed by manifest.json (the sha256 of every file, which the runtime checks on load)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_json, sha256_file
from pacplan.io.undo import undone_on_failure
from pacplan_runtime.bundle import MANIFEST, MANIFEST_FORMAT


def refuse_nonempty(out: Path) -> None:
    """Export writes only into a new or empty folder."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PacplanError(f"{out} exists and is not an empty folder; choose a new --out")


def whole_or_nothing(out: Path) -> contextlib.AbstractContextManager[None]:
    """An export that fails (refused, a full disk, Ctrl-C) removes what it wrote and nothing
    else: a new `out` (and the parents it made) goes, an empty one is left empty
    (`refuse_nonempty` runs before, outside this block)."""
    return undone_on_failure(out)


def write_manifest(out: Path) -> None:
    """manifest.json: the sha256 of every file written under `out`."""
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    atomic_write_json(out / MANIFEST, {"format": MANIFEST_FORMAT,
                                       "files": {f: sha256_file(out / f) for f in files}})


