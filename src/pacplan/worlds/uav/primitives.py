"""The 25 motion primitives: 1 s at 1.25 m/s forward with a rescaled-logistic side/vertical shift.

The public code's sigmoid was not rescaled (it jumps 3.7 % at t = 0 and never reaches the
offset); here s(0) = 0 and s(1) = 1 exactly, as docs/design.md specifies.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pacplan.worlds.uav import spec

_LO = 1.0 / (1.0 + math.exp(spec.SIGMOID_GAIN * 0.5))
_HI = 1.0 / (1.0 + math.exp(-spec.SIGMOID_GAIN * 0.5))


def s_curve(t: np.ndarray | float) -> np.ndarray:
    """Rescaled logistic σ(6.5 (t − ½)) with s(0) = 0, s(1) = 1 (clamped outside [0, 1]).

    exp is the C library's (`math.exp`), not NumPy's: on AVX-512 CPUs `np.exp` takes NumPy's
    own kernels, whose last bits differ, and these values are the collision checks' positions
    and an exported planner's fixed parts (checked by sha256 in the runtime)."""
    t = np.clip(np.asarray(t, dtype=np.float64), 0.0, 1.0)
    sig = 1.0 / (1.0 + _libm_exp(-spec.SIGMOID_GAIN * (t - 0.5)))
    out = (sig - _LO) / (_HI - _LO)
    return np.where(t >= 1.0, 1.0, np.where(t <= 0.0, 0.0, out))


_libm_exp = np.vectorize(math.exp, otypes=[np.float64])


def s_inverse(s: float) -> float:
    """The time t in [0, 1] at which s_curve(t) = s (for analytic collision-time tests)."""
    sig = _LO + s * (_HI - _LO)
    return 0.5 + math.log(sig / (1.0 - sig)) / spec.SIGMOID_GAIN


def check_times() -> np.ndarray:
    """Local times of the collision checks within one primitive: 0.05, 0.10, ..., 1.00."""
    return np.arange(1, spec.CHECKS_PER_PRIM + 1) * spec.CHECK_DT


def displacement(prim: np.ndarray | int, t: np.ndarray | float) -> np.ndarray:
    """Offsets (..., 3) from the primitive's start at local times t for primitive indices prim.

    Broadcasts prim (...) against t (...).
    """
    offs = spec.primitive_offsets()[np.asarray(prim)]
    s = s_curve(t)
    t = np.asarray(t, dtype=np.float64)
    return np.stack(
        np.broadcast_arrays(offs[..., 0] * s, spec.SPEED * t, offs[..., 1] * s), axis=-1
    )


def check_displacements() -> np.ndarray:
    """(25, 20, 3) offsets of every primitive at every collision-check time."""
    return displacement(np.arange(spec.N_PRIMS)[:, None], check_times()[None, :])


def grid_step(prim: Any) -> tuple[Any, Any]:
    """End offsets of primitives in grid units (multiples of 0.5 m): (dix, diz).

    Operators only, so it works on ints, numpy arrays and torch tensors alike (any device).
    """
    return prim // 5 - 2, prim % 5 - 2
