"""Loading and checking cost matrices: the only data a certificate rests on.

Matrices are .npy files read by `pacplan.files.load_npy` (never unpickled; sizes checked before
allocating). Every problem (missing file, damaged or object arrays, wrong shape, NaN, costs
outside [0, 1]) is a `PacplanError` naming the file. Clipping out-of-range costs is allowed only
when asked for, and the number of clipped entries is kept so the certificate can record it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pacplan.errors import PacplanError
from pacplan.files import npy_from_bytes, read_file_bytes, sha256_bytes
from pacplan.validation import check_unit_costs


@dataclass(frozen=True)
class CostMatrix:
    """An N × m cost matrix, where it came from, and what was done to it."""

    values: np.ndarray  # float64, N × m, every entry in [0, 1]
    path: Path | None
    sha256: str
    rows: int
    clipped: int  # entries moved into [0, 1] by --clip


def sha256_array(values: np.ndarray) -> str:
    """Hex sha256 of an array's dtype, shape and bytes (for matrices built in memory)."""
    arr = np.ascontiguousarray(values)
    digest = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    digest.update(arr.tobytes())
    return digest.hexdigest()


def load_cost_matrix(path: str | Path, rows: int | None = None, clip: bool = False,
                     name: str | None = None) -> CostMatrix:
    """Read a cost matrix from .npy (no pickle), optionally keeping only its first `rows` rows."""
    path = Path(path)
    label = name or str(path)
    if not path.is_file():
        raise PacplanError(f"{label}: no such file {path}")
    data = read_file_bytes(path, label)  # the hash recorded is of the bytes used
    raw = npy_from_bytes(data, label)
    if raw.ndim == 2 and rows is not None:
        if rows < 1:
            raise PacplanError(f"{label}: --rows must be ≥ 1, got {rows}")
        if rows > raw.shape[0]:
            raise PacplanError(f"{label}: --rows {rows} exceeds the matrix's {raw.shape[0]} rows")
        raw = raw[:rows]
    values, clipped = check_unit_costs(raw, label, clip)
    return CostMatrix(values=values, path=path, sha256=sha256_bytes(data),
                      rows=values.shape[0], clipped=clipped)
