"""Reading and writing files safely: the one home of atomic writes, pickle-free arrays,
byte-reproducible safetensors and sha256.

Every file pacplan writes goes through `atomic_write_bytes`: data lands in a temporary file in
the same folder, is fsynced, then `os.replace`d over the target, so a killed process leaves the
old file or the new one, never half of one, and the temporary file is removed on failure.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically (old or new content after a kill, never half)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """UTF-8 text, written atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Indented JSON with a final newline, written atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def atomic_save_npy(path: str | Path, array: np.ndarray) -> None:
    """A plain .npy (never a pickle), written atomically."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())


def load_npy(path: str | Path) -> np.ndarray:
    """Read a plain numeric .npy (never a pickle)."""
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise PacplanError(f"{path}: unreadable array ({exc})") from None


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file's bytes, read in blocks."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def safetensors_bytes(arrays: dict[str, np.ndarray], metadata: dict[str, str] | None = None
                      ) -> bytes:
    """safetensors bytes that depend only on the content: the same arrays and metadata always
    give the same bytes.

    The safetensors writer emits its JSON header from a hash map, so the order of metadata keys
    (and so the file's sha256) varies from run to run. The header is re-emitted here with sorted
    keys, padded with spaces to a multiple of 8 bytes as the format requires; the data section
    is unchanged.
    """
    from safetensors.numpy import save

    raw = save({k: np.ascontiguousarray(v) for k, v in arrays.items()}, metadata=metadata)
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + size])
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + raw[8 + size :]


def save_safetensors(path: str | Path, arrays: dict[str, np.ndarray],
                     metadata: dict[str, str] | None = None) -> None:
    """Write a byte-reproducible safetensors file atomically."""
    atomic_write_bytes(path, safetensors_bytes(arrays, metadata))
