"""Stand-in for another CPU's float64 maths, so the suite can be run as an AVX-512 machine.

On x86-64-v4 CPUs (AVX-512: recent Xeons, AMD Zen 4) NumPy computes float64 `exp`, `log`,
`sin`, `power`, `arctan2`, … with its own vector kernels, which differ from the C library's in
the last bit of some results. A test that passes only where those bits agree is a test of this
machine, not of pacplan's contract (docs/reproducibility.md). With `PACPLAN_TEST_OTHER_LIBM=1`,
`tests/conftest.py` calls `install()`: each of those NumPy functions then moves about half of
its float64 results one ulp up, chosen by the result's own bits (so the same input always gives
the same output, as a real library does). Results a real library also gets exact (integers
such as exp(0) or 2.0**3, infinities, NaN) are left alone. Code in subprocesses and in C
extensions (MuJoCo, torch) is not affected.
"""

from __future__ import annotations

import contextlib
import functools
import math
import struct
from collections.abc import Iterator
from typing import Any

import numpy as np

# the float64 functions NumPy 2 dispatches to X86_V4 (AVX-512) kernels:
# numpy.lib.introspect.opt_func_info(signature="float64") lists them
FUNCTIONS = ("exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
             "arcsin", "arccos", "arctan", "arctan2", "sinh", "cosh", "tanh", "arcsinh",
             "arccosh", "arctanh", "cbrt", "power")

_installed: dict[str, Any] = {}


_HASH = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1


def _nudge_scalar(x: np.float64) -> np.float64:
    """`nudge` of one float64 scalar in plain Python: the same choice, without the array
    temporaries that make a wrapped scalar call forty times slower than NumPy's own."""
    v = float(x)
    bits = struct.unpack("<Q", struct.pack("<d", v))[0]
    if ((bits * _HASH) & _MASK) >> 63 and math.isfinite(v) and math.floor(v) != v:
        return np.float64(math.nextafter(v, math.inf))
    return x


def nudge(result: Any) -> Any:
    """`result` with about half its finite, non-integer float64 entries one ulp up."""
    if type(result) is np.float64:
        return _nudge_scalar(result)
    if isinstance(result, tuple):  # ufuncs with two outputs: not among FUNCTIONS
        return result
    arr = np.asarray(result)
    if arr.dtype != np.float64:
        return result
    flat = arr.reshape(-1)  # 1-d, so the hash multiplies arrays (wrapping) not scalars (warning)
    bits = flat.view(np.uint64)
    chosen = ((bits * np.uint64(_HASH)) >> np.uint64(63)) == 1
    chosen &= np.isfinite(flat) & (np.floor(flat) != flat)  # integers: exact everywhere
    if not chosen.any():
        return result
    moved = np.where(chosen, np.nextafter(flat, np.inf), flat).reshape(arr.shape)
    if isinstance(result, np.ndarray):
        result[...] = moved
        return result
    return np.float64(moved)


def _wrap(ufunc: np.ufunc) -> Any:
    @functools.wraps(ufunc)
    def other_cpu(*args: Any, **kwargs: Any) -> Any:
        return nudge(ufunc(*args, **kwargs))
    for attr in ("nin", "nout", "nargs", "types", "ntypes", "identity", "signature",
                 "reduce", "accumulate", "outer", "at", "reduceat"):
        setattr(other_cpu, attr, getattr(ufunc, attr))
    return other_cpu


def install() -> None:
    """Replace NumPy's float64 transcendental functions by their one-ulp-off twins."""
    with contextlib.suppress(ImportError):  # registers loops on NumPy's ufuncs at import:
        import ml_dtypes  # noqa: F401          # it must see the real ones
    for name in FUNCTIONS:
        if name not in _installed:
            _installed[name] = getattr(np, name)
            setattr(np, name, _wrap(_installed[name]))


def uninstall() -> None:
    """Put NumPy's own functions back."""
    for name, ufunc in _installed.items():
        setattr(np, name, ufunc)
    _installed.clear()


@contextlib.contextmanager
def active() -> Iterator[None]:
    """The stand-in for a block; left in force afterwards when it already was (a whole session
    run by scripts/test-as-another-cpu.sh must not get NumPy's own functions back midway)."""
    already = bool(_installed)
    install()
    try:
        yield
    finally:
        if not already:
            uninstall()
