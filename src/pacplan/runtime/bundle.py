"""A planner directory's files, read and checked: manifest hashes, planner.json, weights.

The planner directory holds manifest.json ({"format", "files": {relative path: sha256}}); every
listed file is hashed on load, so a changed weight, probability or primitive is refused before
the planner acts. safetensors is read here with numpy (the format is an 8-byte length, a JSON
header and raw little-endian data), so the runtime needs no safetensors package.
"""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

MANIFEST = "manifest.json"
PLANNER = "planner.json"
MANIFEST_FORMAT = "pacplan-planner-manifest/1"
PLANNER_FORMAT = "pacplan-planner/1"
_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}


class PlannerError(ValueError):
    """A planner directory or an observation that cannot be used; the message names it."""


class UncertifiedUseWarning(UserWarning):
    """The planner is being used in a way its certificate does not cover."""


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from `path`, or a PlannerError naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise PlannerError(f"{path}: unreadable ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise PlannerError(f"{path}: not a JSON object")
    return data


def checked_files(root: Path) -> dict[str, str]:
    """manifest.json's {relative path: sha256}, after hashing every file it lists."""
    if not (root / MANIFEST).is_file():
        raise PlannerError(f"{root}: no {MANIFEST}; not a planner directory (pacplan export)")
    manifest = read_json(root / MANIFEST)
    files = manifest.get("files")
    if manifest.get("format") != MANIFEST_FORMAT or not isinstance(files, dict):
        raise PlannerError(f"{root / MANIFEST}: not a {MANIFEST_FORMAT} manifest")
    for name, digest in files.items():
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts or not isinstance(digest, str):
            raise PlannerError(f"{root / MANIFEST}: entry {name!r} is not a file inside the "
                               "planner directory with a sha256")
        path = root / rel
        if not path.is_file():
            raise PlannerError(f"{path}: listed in {MANIFEST} but missing")
        actual = sha256_file(path)
        if actual != digest:
            raise PlannerError(f"{path}: sha256 {actual[:12]}… ≠ {digest[:12]}… recorded in "
                               f"{MANIFEST} (the file was changed)")
    if PLANNER not in files:
        raise PlannerError(f"{root / MANIFEST}: does not list {PLANNER}")
    return dict(files)


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """Arrays of a safetensors file (F32, F64, I64), read with numpy."""
    data = path.read_bytes()
    try:
        (size,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + size])
        body = memoryview(data)[8 + size :]
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, stop = info["data_offsets"]
            arr = np.frombuffer(body[start:stop], dtype=_DTYPES[info["dtype"]])
            out[name] = arr.reshape(info["shape"]).copy()
    except (struct.error, ValueError, KeyError, TypeError) as exc:
        raise PlannerError(f"{path}: not a readable safetensors file ({exc})") from None
    return out
