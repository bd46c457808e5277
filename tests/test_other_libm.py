"""The other-CPU stand-in (tests/other_libm.py) moves a scalar exactly as it moves the same value
in an array: its fast scalar path changes nothing the other-CPU pass tests."""

from __future__ import annotations

import numpy as np

import other_libm


def test_a_scalar_is_nudged_as_the_same_value_in_an_array() -> None:
    rng = np.random.default_rng(0)
    values = np.concatenate([
        rng.normal(size=4000) * 10.0 ** rng.integers(-300, 300, 4000),
        rng.uniform(-5, 5, 4000), np.arange(-50, 50, dtype=np.float64),
        [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1e300]])
    as_array = other_libm.nudge(values.copy())
    scalars = [other_libm.nudge(np.float64(v)) for v in values]
    assert all(type(s) is np.float64 for s in scalars)
    assert np.array_equal(np.array(scalars), as_array, equal_nan=True)
    moved = (as_array != values) & ~np.isnan(values)
    assert 0.3 < moved[:8000].mean() < 0.7  # about half of the non-integers move one ulp
    assert not moved[8000:8100].any()  # integers stay
    assert np.array_equal(as_array[moved], np.nextafter(values[moved], np.inf))
