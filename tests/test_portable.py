"""`pacplan.portable`: exp, log and cos that give the same bits on every CPU.

Two oracles: the C library's `math` functions (accuracy, to a few units in the last place) and
a pinned sha256 of the outputs on a fixed grid (the bits, which must not move with the CPU, the
NumPy SIMD level or the BLAS kernel: tests/pipeline/test_compare.py runs under forced kernels too).
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from pacplan import portable

RNG = np.random.default_rng(20261126)
EXP_X = np.concatenate([RNG.uniform(-40, 40, 20_000), RNG.uniform(-745, 709, 2_000),
                        np.linspace(-6, 3, 1_001)])  # ES's ½ log σ² lives in [−6, 3]
LOG_X = np.concatenate([np.ldexp(RNG.uniform(1, 2, 20_000), RNG.integers(-1000, 1000, 20_000)),
                        RNG.uniform(0.5, 2, 2_000),
                        np.arange(1.0, 1_001.0)])  # rank utilities take logs of 1..λ


def _ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
    return np.abs(got - ref) / np.spacing(np.abs(ref))


def test_exp_is_within_one_ulp_of_the_c_library() -> None:
    ref = np.array([math.exp(v) for v in EXP_X])
    normal = ref > np.finfo(np.float64).tiny
    assert _ulps(portable.exp(EXP_X)[normal], ref[normal]).max() <= 1.0


def test_log_is_within_three_ulps_of_the_c_library() -> None:
    ref = np.array([math.log(v) for v in LOG_X])
    nonzero = ref != 0
    assert _ulps(portable.log(LOG_X)[nonzero], ref[nonzero]).max() <= 3.0
    assert portable.log(1.0) == 0.0


def test_cos_on_a_schedule_phase() -> None:
    x = np.linspace(0.0, math.pi, 10_001)
    assert np.abs(portable.cos(x) - np.array([math.cos(v) for v in x])).max() < 1e-15
    with pytest.raises(ValueError, match="0, π"):
        portable.cos(-0.1)


def test_special_values() -> None:
    got = portable.exp(np.array([0.0, -np.inf, np.inf, np.nan, 710.0, -746.0, -744.0]))
    assert got[0] == 1.0 and got[1] == 0.0 and got[2] == np.inf and np.isnan(got[3])
    assert got[4] == np.inf and got[5] == 0.0 and 0.0 < got[6] < np.finfo(np.float64).tiny
    got = portable.log(np.array([0.0, -1.0, np.inf, np.nan, 5e-324]))
    assert got[0] == -np.inf and np.isnan(got[1]) and got[2] == np.inf and np.isnan(got[3])
    assert got[4] == pytest.approx(math.log(5e-324), rel=1e-15)


def test_the_bits_are_pinned() -> None:
    """Recorded once; the same on any CPU, since only IEEE-754 basic operations are used."""
    digest = hashlib.sha256()
    for values in (portable.exp(EXP_X), portable.log(LOG_X),
                   portable.cos(np.linspace(0.0, math.pi, 10_001))):
        digest.update(np.ascontiguousarray(values, dtype="<f8").tobytes())
    assert digest.hexdigest() == PINNED


PINNED = "6a150e7c94a8aa2622977d83641a7e0e4345a2970c240468f1b4e08b5dce1f62"
