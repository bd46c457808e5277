"""A planner directory's files, read and checked: manifest hashes, planner.json, weights.

The planner directory holds manifest.json ({"format", "files": {relative path: sha256}}). It is
a self-contained tree of regular files, each listed once: a symlink, a FIFO or an unlisted file
is refused, and every listed file is hashed on load, so a changed weight, probability or
primitive is refused before the planner acts. A file that is used is read once and its bytes
hashed (`read_checked`): a file swapped after the check is refused, never used.
safetensors is read here with numpy (the format is an 8-byte length, a JSON header and raw
little-endian data), so the runtime needs no safetensors package.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
import struct
import unicodedata
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
PLANNER = "planner.json"
MANIFEST_FORMAT = "pacplan-planner-manifest/1"
PLANNER_FORMAT = "pacplan-planner/1"
_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}
_SHA256 = re.compile(r"[0-9a-f]{64}")


class PlannerError(ValueError):
    """A planner directory or an observation that cannot be used; the message names it."""


class UncertifiedUseWarning(UserWarning):
    """The planner is being used in a way its certificate does not cover."""


def _one_line(text: str) -> str:
    """Control characters (from a file name, say) shown escaped: one line, no terminal codes."""
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch).startswith("C") else ch
                   for ch in text)


def _fail(text: str) -> PlannerError:
    return PlannerError(_one_line(text))


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes, read once without following a symlink or waiting on a FIFO;
    every problem is a PlannerError naming the file."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise _fail(f"{path}: cannot read ({exc.strerror or exc})") from None
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _fail(f"{path}: not a regular file")
        try:
            return fh.read()
        except OSError as exc:
            raise _fail(f"{path}: cannot read ({exc.strerror or exc})") from None


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(read_bytes(path)).hexdigest()


class _Duplicate(ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Duplicate(f"key {key!r} appears twice")
        out[key] = value
    return out


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(data: bytes, where: Path | str) -> dict[str, Any]:
    """A JSON object from bytes: UTF-8, unique keys, no NaN or Infinity, bounded depth."""
    try:
        value = json.loads(data.decode("utf-8"), object_pairs_hook=_unique,
                           parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        reason = " ".join(str(exc).split()) or type(exc).__name__
        raise _fail(f"{where}: not valid JSON ({type(exc).__name__}: {reason})") from None
    if not isinstance(value, dict):
        raise _fail(f"{where}: a JSON {type(value).__name__}, not a JSON object")
    return value


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`, or a PlannerError naming the file."""
    return parse_json(read_bytes(path), path)


def _canonical(name: Any) -> bool:
    """A plain relative POSIX path inside the directory, written one way only."""
    if not isinstance(name, str) or not name or "\\" in name or "\x00" in name:
        return False
    rel = PurePosixPath(name)
    return (not rel.is_absolute() and rel.as_posix() == name
            and all(part not in (".", "..") for part in rel.parts))


def tree_files(root: Path) -> set[str]:
    """Every regular file under `root`, as relative POSIX paths; a symlink or any entry that
    is not a regular file or a folder (FIFO, socket, device) is refused: a planner is a
    self-contained tree of regular files."""
    found: set[str] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            raise _fail(f"{folder}: cannot list ({exc.strerror or exc})") from None
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink():
                raise _fail(f"{path}: a symbolic link; a planner directory holds regular "
                            "files only (copy the file in, then export again)")
            if entry.is_dir(follow_symlinks=False):
                stack.append(path)
            elif entry.is_file(follow_symlinks=False):
                found.add(path.relative_to(root).as_posix())
            else:
                raise _fail(f"{path}: not a regular file (a FIFO, socket or device); a "
                            "planner directory holds regular files only")
    return found


def planner_root(path: str | Path) -> Path:
    """The planner directory, resolved (a symlink to the directory itself is fine)."""
    if not isinstance(path, (str, os.PathLike)) or isinstance(os.fspath(path), bytes):
        raise _fail(f"a planner directory is a path (str or os.PathLike), got "
                    f"{type(path).__name__}")
    try:
        root = Path(path).resolve(strict=True)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise _fail(f"{path}: not a planner directory ({type(exc).__name__}: "
                    f"{getattr(exc, 'strerror', None) or exc})") from None
    if not root.is_dir():
        raise _fail(f"{path}: not a planner directory (not a folder)")
    return root


def checked_files(root: Path) -> dict[str, str]:
    """manifest.json's {relative path: sha256}, after checking that the directory holds
    exactly the listed regular files (each listed once, in one spelling) and hashing each."""
    present = tree_files(root)
    if MANIFEST not in present:
        raise _fail(f"{root}: no {MANIFEST}; not a planner directory (pacplan export)")
    where = root / MANIFEST
    manifest = read_json(where)
    files = manifest.get("files")
    if manifest.get("format") != MANIFEST_FORMAT or not isinstance(files, dict):
        raise _fail(f"{where}: not a {MANIFEST_FORMAT} manifest")
    for name, digest in files.items():
        if not _canonical(name) or name == MANIFEST or not isinstance(digest, str) \
                or not _SHA256.fullmatch(digest):
            raise _fail(f"{where}: entry {name!r} is not a file inside the planner "
                        "directory (a plain relative path) with a sha256")
    present -= {MANIFEST}
    missing = sorted(set(files) - present)
    if missing:
        raise _fail(f"{root / missing[0]}: listed in {MANIFEST} but missing (or not a "
                    "regular file)")
    unlisted = sorted(present - set(files))
    if unlisted:
        raise _fail(f"{root / unlisted[0]}: not listed in {MANIFEST}, so unchecked")
    for name, digest in files.items():
        check_sha(root / name, read_bytes(root / name), digest)
    if PLANNER not in files:
        raise _fail(f"{where}: does not list {PLANNER}")
    return dict(files)


def check_sha(path: Path, data: bytes, digest: str) -> None:
    actual = hashlib.sha256(data).hexdigest()
    if actual != digest:
        raise _fail(f"{path}: sha256 {actual[:12]}… ≠ {digest[:12]}… recorded in {MANIFEST} "
                    "(the file was changed)")


def read_checked(root: Path, name: str, files: dict[str, str]) -> bytes:
    """The bytes of listed file `name`, read once and hashed: what is used is what is checked
    (a file swapped after `checked_files` hashed it is refused, never used)."""
    if name not in files:
        raise _fail(f"{root / name}: not listed in {MANIFEST}, so unchecked")
    data = read_bytes(root / name)
    check_sha(root / name, data, files[name])
    return data


def parse_safetensors(data: bytes, where: Path | str) -> dict[str, np.ndarray]:
    """Arrays of safetensors bytes (F32, F64, I64), read with numpy; the header is checked
    (shapes, dtypes and offsets tile the data exactly) before any array is made."""
    try:
        if len(data) < 8:
            raise ValueError("shorter than its 8-byte header length")
        (size,) = struct.unpack("<Q", data[:8])
        if size > len(data) - 8:
            raise ValueError(f"header length {size} exceeds the file")
        header = parse_json(data[8 : 8 + size], where)
        body = memoryview(data)[8 + size :]
        spans, out = [], {}
        for name, info in header.items():
            if name == "__metadata__":
                if not isinstance(info, dict) or not all(
                        isinstance(v, str) for v in info.values()):
                    raise ValueError("__metadata__ is not an object of strings")
                continue
            if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
                raise ValueError(f"tensor {name!r} is not {{dtype, shape, data_offsets}}")
            dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
            if dtype not in _DTYPES:
                raise ValueError(f"tensor {name!r} has dtype {dtype!r} (not one of "
                                 f"{', '.join(_DTYPES)})")
            if not isinstance(shape, list) or not all(_natural(d) for d in shape):
                raise ValueError(f"tensor {name!r} has shape {shape!r}, not a list of "
                                 "integers ≥ 0")
            if not (isinstance(offsets, list) and len(offsets) == 2
                    and all(_natural(v) for v in offsets) and offsets[0] <= offsets[1]):
                raise ValueError(f"tensor {name!r} has data_offsets {offsets!r}")
            start, stop = offsets
            itemsize = np.dtype(_DTYPES[dtype]).itemsize
            if stop - start != math.prod(shape) * itemsize:
                raise ValueError(f"tensor {name!r}: shape {shape} of {dtype} needs "
                                 f"{math.prod(shape) * itemsize} bytes, data_offsets give "
                                 f"{stop - start}")
            spans.append((start, stop))
            out[name] = (start, stop, _DTYPES[dtype], shape)
        position = 0
        for start, stop in sorted(spans):
            if start != position:
                raise ValueError("tensors' data_offsets overlap or leave gaps")
            position = stop
        if position != len(body):
            raise ValueError(f"the data section holds {len(body)} bytes, the tensors "
                             f"{position}")
        return {name: np.frombuffer(body[a:b], dtype=t).reshape(shape).copy()
                for name, (a, b, t, shape) in out.items()}
    except PlannerError:
        raise
    except (struct.error, ValueError) as exc:
        raise _fail(f"{where}: not a readable safetensors file ({exc})") from None


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Arrays of a safetensors file (F32, F64, I64), read with numpy."""
    return parse_safetensors(read_bytes(path), path)
