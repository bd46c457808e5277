"""A run directory made by a command that was then refused is removed, not left half-made.

`pacplan run --prior bad.safetensors --out runs/x` freezes config.yaml and takes run.lock
before it reads the prior; when the prior is refused, runs/x would be left holding just those
two files, and a later run with another config there is refused as "made by a different
config". Only a folder this command created, holding nothing but those files, is removed:
any finished or resumable work (a manifest, ES state) is always kept.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from pacplan.io.undo import first_missing
from pacplan.pipeline.rundir import RunDir

_SCAFFOLD = {RunDir.CONFIG, RunDir.LOCK}


@contextlib.contextmanager
def discard_if_refused(path: str | Path) -> Iterator[None]:
    """Remove `path` if it did not exist before and the body fails having made only its
    scaffold (config.yaml, run.lock); the exception propagates unchanged."""
    path = Path(path)
    made = first_missing(path)  # the outermost folder this command would create
    try:
        yield
    except BaseException:
        if made is not None:
            _remove_scaffold(path, made)
        raise


def _remove_scaffold(path: Path, made: Path) -> None:
    """Remove `path` if it holds only the scaffold, then the parents this command made on the
    way to it (up to `made`), each only if empty."""
    with contextlib.suppress(OSError):
        entries = list(path.iterdir())
        if all(e.is_file() and not e.is_symlink() and e.name in _SCAFFOLD for e in entries):
            for entry in entries:
                entry.unlink()
            folder = Path(os.path.abspath(path))
            stop = Path(os.path.abspath(made))
            while True:
                folder.rmdir()  # OSError when not empty: the rest is kept
                if folder == stop:
                    break
                folder = folder.parent
