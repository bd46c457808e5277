"""The output folder of `pacplan export`: new or empty, written whole or not at all, and
sealed by manifest.json (the sha256 of every file, which the runtime checks on load)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_json, sha256_file
from pacplan_runtime.bundle import MANIFEST, MANIFEST_FORMAT


def refuse_nonempty(out: Path) -> None:
    """Export writes only into a new or empty folder."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise PacplanError(f"{out} exists and is not an empty folder; choose a new --out")


@contextlib.contextmanager
def whole_or_nothing(out: Path) -> Iterator[None]:
    """An export that fails (refused, a full disk, Ctrl-C) leaves `out` as it found it: removed
    if it was not there, emptied if it was an empty folder (export writes only into those)."""
    existed = out.exists()
    try:
        yield
    except BaseException:
        if existed and out.is_dir() and not out.is_symlink():
            for entry in out.iterdir():
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry, ignore_errors=True)
                else:
                    entry.unlink(missing_ok=True)
        elif not existed:
            shutil.rmtree(out, ignore_errors=True)
        raise


def write_manifest(out: Path) -> None:
    """manifest.json: the sha256 of every file written under `out`."""
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    atomic_write_json(out / MANIFEST, {"format": MANIFEST_FORMAT,
                                       "files": {f: sha256_file(out / f) for f in files}})


