"""The UAV's primitive positions are the same bits on every CPU.

They are where the collision checks happen and, as an exported planner's fixed parts, are
checked by sha256 in the runtime: with `np.exp` in the s-curve, a planner exported on an AVX-512
CPU (NumPy's own exp kernels) was refused by the runtime as "not the UAV world's". Oracle: the
same computation with NumPy's float64 exp one ulp off (tests/other_libm.py).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

import other_libm
from pacplan.export.fixed import fixed_parts
from pacplan.runtime.spec import FIXED_SHA256
from pacplan.worlds.uav import primitives


def _fixed_sha() -> str:
    rest = {k: v for k, v in fixed_parts("uav", {}).items() if k != "net_scale"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":"))
                          .encode()).hexdigest()


def test_check_positions_and_fixed_parts_do_not_depend_on_numpys_exp() -> None:
    here = primitives.check_displacements().copy()
    times = np.linspace(-0.5, 1.5, 401)
    curve = primitives.s_curve(times)
    sha = _fixed_sha()
    with other_libm.active():
        x = -6.5 * (times - 0.5)
        assert np.any(np.exp(x) != other_libm._installed["exp"](x))  # the stand-in is in force
        assert primitives.check_displacements().tobytes() == here.tobytes()
        assert primitives.s_curve(times).tobytes() == curve.tobytes()
        assert _fixed_sha() == sha
    assert sha in FIXED_SHA256["uav"]  # and the runtime accepts them


def test_the_s_curve_is_the_logistic_it_names() -> None:
    t = np.linspace(0.0, 1.0, 101)
    sig = 1.0 / (1.0 + np.exp(-6.5 * (t - 0.5)))
    lo, hi = 1.0 / (1.0 + np.exp(3.25)), 1.0 / (1.0 + np.exp(-3.25))
    np.testing.assert_allclose(primitives.s_curve(t), (sig - lo) / (hi - lo), rtol=0, atol=1e-15)
    assert primitives.s_curve(0.0) == 0.0 and primitives.s_curve(1.0) == 1.0
