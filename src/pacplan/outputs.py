"""Output paths that would destroy an input: refused before anything is read or written.

`certify-matrix --out costs.npy` or `render --out theta.npy` would replace the very file the
command reads; a hard link or another spelling of the same path is the same file.
"""

from __future__ import annotations

import os
from pathlib import Path

from pacplan.errors import PacplanError


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two paths name one file (the same inode, or the same resolved path)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
        return Path(a).resolve() == Path(b).resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop; not an input then
        return False


def refuse_overwriting(out: str | Path, option: str,
                       inputs: dict[str, str | Path | None]) -> None:
    """Refuse an output path that is one of the command's inputs (it would be lost)."""
    for name, path in inputs.items():
        if path is not None and same_file(out, path):
            raise PacplanError(f"{option} {out} is the input {name}; writing there would "
                               "destroy it: choose another output path")
