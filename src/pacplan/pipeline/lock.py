"""One process at a time in a run directory: an OS-level lock on its run.lock.

`flock` is released by the kernel when the process dies, however it dies, so a killed run never
leaves a stale lock; a second process is refused at once with a line naming the holder (pid,
host and start time, written into the lock file). The lock is re-entrant within a process, so
`run` may train its prior through `train_prior`, which locks the directory too. POSIX only.

Why not the `filelock` package: its FileLock takes the same flock, but a refused process gets a
timeout naming the file, not who holds it. Naming the holder needs the holder's own descriptor
to write pid, host and start time into run.lock after locking, and the refused one to read them
from its own descriptor without truncating them; with that, what is left is ~40 lines over
fcntl, so a dependency would not shorten this module.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path

from pacplan.errors import PacplanError
from pacplan.io.outputs import owning


@contextlib.contextmanager
def hold(folder: Path, lock_file: Path, option: str = "--out") -> Iterator[None]:
    """Hold `lock_file` (creating `folder`) for the duration of the block; a refusal names the
    folder's option as the caller spells it (`option`)."""
    key = _lock_key(folder, lock_file)
    if key in _HELD:
        _HELD[key][1] += 1
    else:
        _HELD[key] = [_acquire(folder, lock_file, option), 1]
    try:
        with owning(folder):  # what it writes there is its own work (`refuse_overwriting`)
            yield
    finally:
        _HELD[key][1] -= 1
        if _HELD[key][1] == 0:
            os.close(_HELD.pop(key)[0])  # closing the file releases the lock


_HELD: dict[str, list[int]] = {}
"""Locks this process holds: run.lock's real path -> [open descriptor, nesting depth]."""


def _lock_key(folder: Path, lock_file: Path) -> str:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PacplanError(f"cannot use {folder} as a run directory: {exc.strerror}") from None
    return os.path.realpath(lock_file)


def _acquire(folder: Path, path: Path, option: str) -> int:
    """Lock run.lock (flock: the kernel drops it with the process) and write who holds it."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise PacplanError(f"cannot lock {folder}: {exc.strerror} ({path})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise PacplanError(f"{folder} is in use by another pacplan process ({holder}); wait "
                           f"for it to finish, or use another {option} directory") from None
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                              "started": started}).encode() + b"\n", 0)
    return fd


def _holder(fd: int) -> str:
    """Who holds a lock, as written by `_acquire` (it may not have written yet)."""
    try:
        info = json.loads(os.pread(fd, 4096, 0) or b"{}")
        return f"pid {int(info['pid'])} on {info['host']}, since {info['started']}"
    except (ValueError, KeyError, TypeError, OSError):
        return "a process that is just starting"
