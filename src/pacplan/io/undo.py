"""Undo a failed write, and only what it wrote: a writer that fails part-way (refused after it
began, a full disk, Ctrl-C) removes the folders and entries this call created, never a file
that was there before it started (an export once emptied the folder it had just refused)."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from pathlib import Path


def first_missing(path: str | Path) -> Path | None:
    """The outermost folder on the way to `path` (or `path` itself) that does not exist yet:
    what creating `path` with its parents makes; None when `path` exists."""
    current, missing = Path(os.path.abspath(path)), None
    while not os.path.lexists(current):
        missing = current
        if current.parent == current:
            break
        current = current.parent
    return missing


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


@contextlib.contextmanager
def undone_on_failure(out: str | Path,
                      on: tuple[type[BaseException], ...] = (BaseException,)) -> Iterator[None]:
    """Run the block that writes `out` (a folder); if it raises one of `on`, remove what the
    block created: `out` and the parents it made when none of them existed, else the entries
    of `out` that were not there before (the folder itself stays). Files that were there
    before are never touched; the exception propagates unchanged."""
    out = Path(out)
    made = first_missing(out)
    before = set(os.listdir(out)) if made is None and out.is_dir() else None
    try:
        yield
    except on:
        if made is not None:
            _remove(made)
        elif before is not None:
            with contextlib.suppress(OSError):
                for name in set(os.listdir(out)) - before:
                    _remove(out / name)
        raise
