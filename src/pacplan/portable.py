"""exp, log and cos on float64 arrays that give the same bits on every x86-64 CPU.

Why not `np.exp`: NumPy dispatches float64 exp and log to its own AVX-512 kernels where the CPU
has them (x86-64-v4) and to the C library elsewhere; the two differ in the last bit of some
results. ES feeds exp(½ log σ²) into every iterate, so a prior trained on an Intel Xeon and on an
AMD EPYC without AVX-512 differed in its last bits. These functions use only the
IEEE-754 operations that every CPU rounds identically (+, −, ×, ÷, rint, ldexp, frexp), one
separate NumPy ufunc call each (so no compiler can fuse a multiply and an add), in a fixed order.
They are accurate to about one unit in the last place (tests/test_portable.py checks them against
the C library), which is all ES and policy sampling need; certificates are not computed with them.
"""

from __future__ import annotations

import math

import numpy as np

# ln 2 split so that k·LN2_HI is exact for |k| < 2^11 (the classic fdlibm constants)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_SQRT_HALF = 0.70710678118654752440
_EXP_MAX = 709.782712893384  # exp overflows above this
_EXP_MIN = -745.1332191019412  # and is 0 below this

_EXP_TAYLOR = [1.0 / math.factorial(k) for k in range(14)]  # |r| ≤ ln2/2: term 14 < 5e-18
_LOG_SERIES = [1.0 / (2 * k + 1) for k in range(12)]  # |s| ≤ 0.1716: term 12 < 1e-20
_COS_TAYLOR = [(-1.0) ** k / math.factorial(2 * k) for k in range(13)]  # |x| ≤ π/2


def _horner(coefficients: list[float], x: np.ndarray) -> np.ndarray:
    """Σ c_k x^k by Horner's rule, one rounded multiply and one rounded add per step."""
    acc = np.full_like(x, coefficients[-1])
    for c in reversed(coefficients[:-1]):
        acc = np.multiply(acc, x)
        acc = np.add(acc, c)
    return acc


def exp(x: np.ndarray | float) -> np.ndarray:
    """e^x elementwise: x = k ln 2 + r with |r| ≤ ½ ln 2, then 2^k times a Taylor polynomial."""
    x = np.asarray(x, dtype=np.float64)
    safe = np.clip(np.nan_to_num(x, nan=0.0), _EXP_MIN, _EXP_MAX)
    k = np.rint(np.multiply(safe, _INV_LN2))
    r = np.subtract(np.subtract(safe, np.multiply(k, _LN2_HI)), np.multiply(k, _LN2_LO))
    # split 2^k in two so a large |k| neither overflows nor loses the subnormal range early
    half = np.trunc(np.multiply(k, 0.5))
    out = np.ldexp(np.ldexp(_horner(_EXP_TAYLOR, r), half.astype(np.int32)),
                   (k - half).astype(np.int32))
    out = np.where(x > _EXP_MAX, np.inf, out)
    out = np.where(x < _EXP_MIN, 0.0, out)
    return np.where(np.isnan(x), np.nan, out)


def log(x: np.ndarray | float) -> np.ndarray:
    """ln x elementwise: x = m·2^e with m ∈ [√½, √2), ln m = 2 artanh((m − 1)/(m + 1))."""
    x = np.asarray(x, dtype=np.float64)
    positive = np.isfinite(x) & (x > 0)
    mantissa, exponent = np.frexp(np.where(positive, x, 1.0))
    low = mantissa < _SQRT_HALF
    mantissa = np.where(low, np.multiply(mantissa, 2.0), mantissa)
    e = np.subtract(exponent, low.astype(exponent.dtype)).astype(np.float64)
    s = np.divide(np.subtract(mantissa, 1.0), np.add(mantissa, 1.0))
    series = np.multiply(np.multiply(s, 2.0), _horner(_LOG_SERIES, np.multiply(s, s)))
    out = np.add(np.multiply(e, _LN2_HI), np.add(np.multiply(e, _LN2_LO), series))
    out = np.where(x == 0, -np.inf, out)
    out = np.where(np.isposinf(x), np.inf, out)
    return np.where(np.isnan(x) | (x < 0), np.nan, out)


def cos(x: np.ndarray | float) -> np.ndarray:
    """cos x elementwise for x ∈ [0, π] (a schedule's phase): Taylor about 0 on [0, π/2] and
    cos x = −cos(π − x) above it."""
    x = np.asarray(x, dtype=np.float64)
    if np.any((x < 0) | (x > math.pi)) or np.any(np.isnan(x)):
        raise ValueError("portable cos takes x in [0, π]")
    upper = x > math.pi / 2
    y = np.where(upper, np.subtract(math.pi, x), x)
    value = _horner(_COS_TAYLOR, np.multiply(y, y))
    return np.where(upper, np.negative(value), value)
