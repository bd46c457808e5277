"""Loading and checking cost matrices: the only data a certificate rests on.

Matrices are .npy files read by `pacplan.io.files.load_npy` (never unpickled; sizes checked before
allocating), or *rational* matrices: a safetensors file holding integer numerators k and, in its
metadata, a denominator d, the costs being exactly k / d. The UAV's costs are multiples of 1/240
and mostly zero, so 100,000 × 50 of them take 5 MB as uint8 numerators instead of 40 MB of
float64; the division is correctly rounded, so every machine decodes the same floats.
Every problem (missing file, damaged or object arrays, wrong shape, NaN, costs
outside [0, 1]) is a `PacplanError` naming the file. Clipping out-of-range costs is allowed only
when asked for, and the number of clipped entries is kept so the certificate can record it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.files import (
    npy_from_bytes,
    read_file_bytes,
    safetensors_bytes,
    safetensors_metadata,
    sha256_bytes,
)
from pacplan.validation import check_unit_costs


@dataclass(frozen=True)
class CostMatrix:
    """An N × m cost matrix, where it came from, and what was done to it."""

    values: np.ndarray  # float64, N × m, every entry in [0, 1]
    path: Path | None
    sha256: str
    rows: int
    clipped: int  # entries moved into [0, 1] by clipping (--clip, clip=True)


def sha256_array(values: np.ndarray) -> str:
    """Hex sha256 of an array's dtype, shape and bytes (for matrices built in memory)."""
    arr = np.ascontiguousarray(values)
    digest = hashlib.sha256(f"{arr.dtype.str}{arr.shape}".encode())
    digest.update(arr.tobytes())
    return digest.hexdigest()


def load_cost_matrix(path: str | Path, rows: int | None = None, clip: bool = False,
                     name: str | None = None, *,
                     options: tuple[str, str] = ("rows", "clip=True")) -> CostMatrix:
    """Read a cost matrix from .npy (no pickle), optionally keeping only its first `rows` rows.

    `options` names `rows` and clipping as the caller's user writes them, so an error advises
    `--rows`/`--clip` on the command line and `rows`/`clip=True` in Python.
    """
    path = Path(path)
    label = name or str(path)
    rows_option, clip_option = options
    if not path.is_file():
        raise PacplanError(f"{label}: no such file {path}")
    data = read_file_bytes(path, label)  # the hash recorded is of the bytes used
    raw = matrix_from_bytes(data, label)
    if raw.ndim == 2 and rows is not None:
        if rows < 1:
            raise PacplanError(f"{label}: {rows_option} must be ≥ 1, got {rows}")
        if rows > raw.shape[0]:
            raise PacplanError(f"{label}: {rows_option} {rows} exceeds the matrix's "
                               f"{raw.shape[0]} rows")
        raw = raw[:rows]
    values, clipped = check_unit_costs(raw, label, clip, clip_option=clip_option)
    return CostMatrix(values=values, path=path, sha256=sha256_bytes(data),
                      rows=values.shape[0], clipped=clipped)


RATIONAL_FORMAT = "pacplan-rational-costs"
RATIONAL_SUFFIX = ".safetensors"
_UNSIGNED = {np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)}


def matrix_from_bytes(data: bytes, label: str) -> np.ndarray:
    """A cost matrix parsed from bytes already read (and hashed) by the caller: a plain .npy,
    or a rational safetensors file decoded to float64 k / d. Not yet checked to lie in [0, 1]."""
    if len(data) > 8 and data[8:9] == b"{":  # safetensors: 8-byte header length, JSON header
        return _decode_rational(data, label)
    return npy_from_bytes(data, label)  # names what is wrong with anything else as a .npy


def rational_bytes(values: np.ndarray, denominator: int, label: str) -> bytes:
    """Encode a cost matrix whose entries are all multiples of 1/`denominator` (to 1e-9) as a
    rational safetensors file; refuse one that is not, naming the first entry that is not."""
    if not 1 <= denominator <= 65_535:
        raise PacplanError(f"cost denominator must be in 1…65535, got {denominator}")
    values = np.asarray(values, dtype=np.float64)
    scaled = values * denominator
    k = np.rint(scaled)
    off = np.flatnonzero((np.abs(scaled - k) > 1e-9 * denominator) | (k < 0)
                         | (k > denominator))
    if off.size:
        index = np.unravel_index(off[0], values.shape)
        raise PacplanError(f"{label}: entry {tuple(int(i) for i in index)} = "
                           f"{values[index].item()!r} is not a multiple of 1/{denominator} "
                           "in [0, 1] "
                           f"({off.size} entries are not); storage.cost_denominator does not "
                           "fit this world's costs")
    dtype = np.uint8 if denominator <= 255 else np.uint16
    return safetensors_bytes({"numerators": k.astype(dtype)},
                             {"format": RATIONAL_FORMAT, "denominator": str(denominator)})


def _decode_rational(data: bytes, label: str) -> np.ndarray:
    from safetensors import SafetensorError
    from safetensors.numpy import load

    try:
        tensors = load(data)
        meta = safetensors_metadata(data)
    except (SafetensorError, ValueError, RecursionError) as exc:
        raise PacplanError(f"{label}: neither a .npy array nor a rational cost matrix "
                           f"(safetensors: {exc})") from None
    if meta.get("format") != RATIONAL_FORMAT or set(tensors) != {"numerators"}:
        raise PacplanError(f"{label}: a safetensors file but not a rational cost matrix (it "
                           f"needs one tensor 'numerators' and metadata format = "
                           f"{RATIONAL_FORMAT})")
    k = tensors["numerators"]
    d = meta.get("denominator", "")
    if not (isinstance(d, str) and d.isdigit() and 1 <= int(d) <= 65_535):
        raise PacplanError(f"{label}: rational cost matrix with denominator {d!r} (must be an "
                           "integer in 1…65535)")
    if k.dtype not in _UNSIGNED or k.ndim != 2:
        raise PacplanError(f"{label}: rational cost matrix numerators must be a 2-D unsigned "
                           f"integer array, got {k.dtype} {k.shape}")
    return k.astype(np.float64) / int(d)
