"""How much memory this process may still take, so that a size is refused in one line before
it is allocated (`--n 1000000000` once died in an ArrayMemoryError traceback at 7.45 GiB,
after the output folder was made)."""

from __future__ import annotations

import contextlib
import os
import resource

from pacplan.errors import PacplanError


def _meminfo(field: str, path: str = "/proc/meminfo") -> int | None:
    """A /proc/meminfo-style field in bytes (Linux), else None."""
    with contextlib.suppress(OSError, ValueError), open(path, encoding="ascii") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return None


def available_bytes() -> int | None:
    """The least of the machine's available memory and what the address-space limit
    (`ulimit -v`) leaves this process; None when neither is known."""
    limits = []
    free = _meminfo("MemAvailable")
    if free is not None:
        limits.append(free)
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY:
        used = _meminfo("VmSize", f"/proc/{os.getpid()}/status") or 0
        limits.append(max(0, soft - used))
    return min(limits) if limits else None


def check_fits(nbytes: int, what: str, advice: str) -> None:
    """Refuse `nbytes` (what will be held at once, described by `what`) when it exceeds what
    this process may still take; `advice` says how to need less."""
    have = available_bytes()
    if have is not None and nbytes > have:
        raise PacplanError(f"{what} needs {_gib(nbytes)} of memory and this process can take "
                           f"about {_gib(have)}: {advice}")


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB" if n >= 2**27 else f"{n / 2**20:.1f} MiB"
