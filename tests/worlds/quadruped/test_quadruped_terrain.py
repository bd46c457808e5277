"""Terrain sampler: slopes in range, determinism, ridges that return to the ground, and a
PyBullet heightfield that matches the analytic profile."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped.terrain import (
    FLAT_START_M,
    RIDGES_END_M,
    n_ridges,
    sample_terrain,
)


@pytest.mark.parametrize("max_slope", [23.3, 35.0])
def test_slopes_fall_within_configured_range(max_slope: float) -> None:
    slopes = np.concatenate([sample_terrain(s, max_slope).slopes_deg for s in range(300)])
    assert slopes.min() >= 0.0
    assert slopes.max() <= max_slope
    # Uniform on [0, max]: the range is actually used, not a sliver of it.
    assert slopes.max() > 0.97 * max_slope
    assert slopes.min() < 0.03 * max_slope
    assert abs(slopes.mean() - max_slope / 2) < 0.05 * max_slope


def test_same_seed_same_terrain_and_different_seeds_differ() -> None:
    a, b = sample_terrain(7), sample_terrain(7)
    np.testing.assert_array_equal(a.slopes_deg, b.slopes_deg)
    assert not np.array_equal(a.slopes_deg, sample_terrain(8).slopes_deg)


def test_profile_is_flat_start_and_ridges_return_to_ground() -> None:
    t = sample_terrain(3, 35.0)
    assert len(t.slopes_deg) == n_ridges(0.5) == 9
    assert t.height(np.linspace(-5.0, FLAT_START_M, 50)).max() == 0.0
    # every ridge starts and ends at ground level and peaks at plank·tan θ
    starts = t.ridge_starts
    np.testing.assert_allclose(t.height(starts), 0.0, atol=1e-12)
    np.testing.assert_allclose(t.height(starts + 1.0), 0.0, atol=1e-12)
    np.testing.assert_allclose(
        t.height(starts + 0.5), 0.5 * np.tan(np.radians(t.slopes_deg)), rtol=1e-12
    )
    assert starts[-1] + 1.0 <= RIDGES_END_M
    # the planks are planar: measured slope of each half equals θ_k
    for start, theta in zip(starts, t.slopes_deg, strict=True):
        rise = (t.height(start + 0.4) - t.height(start + 0.1)) / 0.3
        fall = (t.height(start + 0.9) - t.height(start + 0.6)) / 0.3
        assert math.degrees(math.atan(rise)) == pytest.approx(theta, abs=1e-9)
        assert math.degrees(math.atan(-fall)) == pytest.approx(theta, abs=1e-9)
    assert t.height(12.0) == 0.0


def test_short_planks_option() -> None:
    t = sample_terrain(0, 35.0, plank_length=0.25)
    assert len(t.slopes_deg) == 19
    np.testing.assert_allclose(
        t.height(t.ridge_starts + 0.25), 0.25 * np.tan(np.radians(t.slopes_deg))
    )


def test_bad_options_are_user_errors() -> None:
    with pytest.raises(PacplanError):
        sample_terrain(-1)
    with pytest.raises(PacplanError):
        sample_terrain(0, plank_length=0.3)
    with pytest.raises(PacplanError):
        sample_terrain(0, max_slope_deg=95.0)


def test_heightfield_matches_profile() -> None:
    """Rays cast straight down onto the simulated terrain hit the analytic profile."""
    import pybullet

    from pacplan.worlds.quadruped.sim import MinitaurSim

    terrain = sample_terrain(11, 35.0)
    sim = MinitaurSim()
    sim.reset(terrain)
    xs = np.linspace(-1.0, 11.0, 241)
    for y in (-3.0, 0.37, 4.0):
        # rays beside the robot's footprint (or past it) only see the terrain
        xs_here = xs if abs(y) > 1 else xs[xs > 1.0]
        hits = pybullet.rayTestBatch(
            [[x, y, 2.0] for x in xs_here],
            [[x, y, -2.0] for x in xs_here],
            physicsClientId=sim.cid,
        )
        assert all(h[0] == sim.terrain_body for h in hits)
        z = np.array([h[3][2] for h in hits])
        np.testing.assert_allclose(z, terrain.height(xs_here), atol=1e-5)
    sim.close()
