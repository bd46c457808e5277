"""Reading and writing files safely: the one home of atomic writes, pickle-free arrays,
byte-reproducible safetensors and sha256.

Every file pacplan writes goes through `atomic_write_bytes`: data lands in a temporary file in
the same folder, is fsynced, then `os.replace`d over the target, so a killed process leaves the
old file or the new one, never half of one, and the temporary file is removed on failure. A
kill between the write and the rename leaves the temporary file (`.NAME.tmpPID`); the next run
of the directory removes it (`remove_stale_temps`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import math
import os
import re
import stat
import struct
import zipfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from pacplan.errors import PacplanError


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically (old or new content after a kill, never half)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        if isinstance(exc, OSError) and exc.filename in (None, str(tmp)):
            exc.filename = str(path)  # a full disk names no file; the user knows the target
        raise


def temp_path(path: Path) -> Path:
    """Where `atomic_write_bytes` writes `path` first: `.NAME.tmpPID` beside it, PID this
    process's, so that a file a killed write leaves behind names the writer that left it."""
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


_TEMP_NAME = re.compile(r"\.(?P<name>.+)\.tmp(?P<pid>[1-9][0-9]{0,9})")


def temp_writer(name: str) -> int | None:
    """The writer's PID in a file name `temp_path` makes, or None for any other name."""
    match = _TEMP_NAME.fullmatch(name)
    return int(match["pid"]) if match else None


def _process_alive(pid: int) -> bool:
    """Whether a process with this PID exists on this machine (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: a PID no process can have
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(folder: str | Path) -> list[Path]:
    """Remove the temporary files that killed atomic writes left under `folder` (a kill between
    the write and the rename leaves `.NAME.tmpPID`); returns them. Only regular files named as
    `temp_path` names them are touched, and only where no live process has that PID: a write in
    progress keeps its file. Call it holding the folder's lock (`pacplan.pipeline.lock`), so no
    pacplan process on another machine is writing there either. Symlinks are not followed."""
    removed: list[Path] = []
    for parent, _dirs, names in os.walk(folder):
        for name in sorted(names):
            pid = temp_writer(name)
            path = Path(parent) / name
            if pid is None or _process_alive(pid):
                continue
            try:
                if not stat.S_ISREG(os.lstat(path).st_mode):
                    continue
                path.unlink()
            except OSError:  # gone meanwhile, or not ours to remove: harmless where it is
                continue
            removed.append(path)
    return removed


def atomic_write_text(path: str | Path, text: str) -> None:
    """UTF-8 text, written atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | Path, obj: Any) -> None:
    """Indented JSON with a final newline, written atomically."""
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def npy_bytes(array: np.ndarray) -> bytes:
    """The bytes of a plain .npy (never a pickle) of `array`."""
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return buf.getvalue()


def atomic_save_npy(path: str | Path, array: np.ndarray) -> None:
    """A plain .npy (never a pickle), written atomically."""
    atomic_write_bytes(path, npy_bytes(array))


def append_json_line(path: str | Path, record: Any) -> None:
    """Append one JSON line and fsync: a kill loses at most the line being written."""
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


def load_npy(path: str | Path, name: str | None = None) -> np.ndarray:
    """Read a plain .npy (never a pickle), checking its header against the file's size before
    allocating, so a damaged or hostile file is a `PacplanError` naming it, never a MemoryError.

    `name` is what the user knows the file as (default: its path).
    """
    label = name or str(path)
    try:
        with open(path, "rb") as fh:
            return _read_npy(fh, label, os.fstat(fh.fileno()).st_size)
    except FileNotFoundError:
        raise PacplanError(f"{label}: no such file {path}") from None
    except OSError as exc:
        raise PacplanError(f"{label}: cannot read {path} ({exc.strerror or exc})") from None


def npy_from_bytes(data: bytes, name: str) -> np.ndarray:
    """A plain .npy parsed from bytes already read (and hashed) by the caller, so what is
    checked is exactly what is used; the same checks as `load_npy`."""
    return _read_npy(io.BytesIO(data), name, len(data))


def _read_npy(fh: BinaryIO, label: str, size: int) -> np.ndarray:
    try:
        shape, dtype = _npy_header(fh, label)
        _check_npy_size(label, shape, dtype, size - fh.tell())
        fh.seek(0)
        return npy_format.read_array(fh, allow_pickle=False)
    except PacplanError:
        raise
    except ValueError as exc:  # a header numpy accepted but data it could not read
        raise PacplanError(f"{label}: unreadable .npy array ({exc})") from None


def read_file_bytes(path: str | Path, name: str | None = None) -> bytes:
    """A regular file's bytes, read once: hash these and parse these, never the path again (a
    file swapped in between would be used unchecked). Every problem is a `PacplanError`."""
    label = name or str(path)
    with open_regular(path, label) as fh:
        try:
            return fh.read()
        except OSError as exc:
            raise PacplanError(f"{label}: cannot read {path} ({exc.strerror or exc})") from None


def open_regular(path: str | Path, name: str | None = None) -> BinaryIO:
    """`path` opened for reading if it is a regular file; every problem is a `PacplanError`.
    The open does not block, so a FIFO or a device is refused, not waited on."""
    label = name or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise PacplanError(f"{label}: no such file {path}") from None
    except OSError as exc:
        raise PacplanError(f"{label}: cannot read {path} ({exc.strerror or exc})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PacplanError(f"{label}: not a regular file")
    return os.fdopen(fd, "rb")


_ZIP_MAGIC = b"PK\x03\x04"


def _npy_header(fh: BinaryIO, label: str) -> tuple[tuple[int, ...], np.dtype]:
    """The shape and dtype a .npy header claims, read without reading any data."""
    start = fh.read(len(npy_format.MAGIC_PREFIX))
    if not start:
        raise PacplanError(f"{label}: not a .npy file (it is empty)")
    if start.startswith(_ZIP_MAGIC):
        raise PacplanError(f"{label}: not a .npy file (a .npz archive; save one array as .npy)")
    if start != npy_format.MAGIC_PREFIX:
        raise PacplanError(f"{label}: not a .npy file (it does not start with the .npy magic "
                           f"string; first bytes {start!r})")
    fh.seek(0)
    try:
        version = npy_format.read_magic(fh)
        readers = {(1, 0): npy_format.read_array_header_1_0,
                   (2, 0): npy_format.read_array_header_2_0}
        if version not in readers:
            raise ValueError(f"unsupported .npy format version {version[0]}.{version[1]}")
        shape, _fortran, dtype = readers[version](fh)
    except ValueError as exc:
        raise PacplanError(f"{label}: damaged .npy header ({exc})".replace("\n", " ")) from None
    if dtype.hasobject:
        raise PacplanError(f"{label}: holds Python objects (dtype {dtype}): pickled data is "
                           "refused; save a plain numeric array")
    return shape, dtype


def _check_npy_size(label: str, shape: tuple[int, ...], dtype: np.dtype, available: int) -> None:
    """The data a header claims must be exactly the bytes that follow it."""
    if any(d < 0 for d in shape):
        raise PacplanError(f"{label}: damaged .npy header (negative shape {shape})")
    needed = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if needed > available:
        raise PacplanError(f"{label}: truncated .npy file: its header claims shape {shape} of "
                           f"{dtype} ({needed} bytes) but only {available} bytes follow")
    if needed < available:
        raise PacplanError(f"{label}: damaged .npy file: {available - needed} more bytes follow "
                           f"the {needed} bytes of data its header claims (shape {shape})")


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
    header, size = _safetensors_header(raw)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + raw[8 + size :]


def _safetensors_header(data: bytes) -> tuple[dict[str, Any], int]:
    """The JSON header of safetensors bytes and its length in bytes."""
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + size]), size


def safetensors_metadata(data: bytes) -> dict[str, str]:
    """The `__metadata__` strings of safetensors bytes the safetensors reader has accepted."""
    meta = _safetensors_header(data)[0].get("__metadata__") or {}
    return {str(k): str(v) for k, v in meta.items()}


def save_safetensors(path: str | Path, arrays: dict[str, np.ndarray],
                     metadata: dict[str, str] | None = None) -> None:
    """Write a byte-reproducible safetensors file atomically."""
    atomic_write_bytes(path, safetensors_bytes(arrays, metadata))


_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    """An uncompressed .npz (as np.savez writes) whose bytes depend only on the arrays: members
    are dated 1980-01-01, not now, so a recomputed checkpoint is the same file, sha256 and all."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for key, array in arrays.items():
            z.writestr(zipfile.ZipInfo(f"{key}.npy", _ZIP_TIME), npy_bytes(array))
    return buf.getvalue()


def npz_arrays(data: bytes, name: str, keys: tuple[str, ...], what: str,
               max_bytes: int | None = None, hint: str = "delete it to recompute it"
               ) -> dict[str, np.ndarray]:
    """The arrays `keys` of .npz bytes already checked (never a pickle); an unreadable file is
    an error naming it (`what`: what the file holds, for the message). `max_bytes`: each
    array's size as its .npy header states it is checked first, so a small archive that
    inflates to gigabytes is refused before it is decompressed (a 2 MB file once took 2.2 GB)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            if max_bytes is not None:
                for key in keys:
                    _check_member_size(archive, key, name, max_bytes)
        with np.load(io.BytesIO(data), allow_pickle=False) as z:
            return {k: z[k] for k in keys}
    except PacplanError:
        raise
    except (ValueError, OSError, KeyError, zipfile.BadZipFile, EOFError) as exc:
        reason = " ".join(str(exc).split())[:200]
        raise PacplanError(f"{name}: unreadable {what} file ({reason}); {hint}") from None


def _check_member_size(archive: zipfile.ZipFile, key: str, name: str, max_bytes: int) -> None:
    """`key`.npy in `archive` holds at most `max_bytes` of data, by its header (read without
    inflating the rest); a KeyError when it is missing, as np.load's."""
    info = archive.getinfo(f"{key}.npy")
    with archive.open(info) as member:
        shape, dtype = _npy_header(member, f"{name}: array {key!r}")
    claimed = math.prod(shape) * dtype.itemsize if all(d >= 0 for d in shape) else -1
    if not 0 <= claimed <= max_bytes or info.file_size > max_bytes + 4096:
        raise PacplanError(f"{name}: array {key!r} is far larger than it can be (shape {shape} "
                           f"of {dtype}, {max(info.file_size, claimed)} bytes uncompressed; at "
                           f"most {max_bytes} expected): refused before reading it")
