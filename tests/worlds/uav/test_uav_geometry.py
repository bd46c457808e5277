"""Analytic checks of the UAV geometry: scenes, primitives, depth and collision times.

The oracles are closed-form geometry (and PyBullet where it is cheap), not the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from uav_helpers import scene_with

from pacplan.errors import PacplanError
from pacplan.worlds.uav import primitives as prims
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.batched import BatchedScene
from pacplan.worlds.uav.scene import point_cylinder_distance, sample_scene

STRAIGHT = 12  # dx = 0, dz = 0
CENTRE_PIXEL = (24, 25)  # samples the image plane at (25, 25): the optical axis


@pytest.fixture(scope="module")
def batched() -> BatchedScene:
    return BatchedScene()


@pytest.fixture(scope="module")
def bullet():
    from pacplan.worlds.uav.bullet import BulletSimulator

    sim = BulletSimulator()
    yield sim
    sim.close()


def test_centre_pixel_is_the_optical_axis() -> None:
    rays = spec.pixel_rays().reshape(spec.IMG, spec.IMG, 3)
    _, _, forward = spec.camera_axes()
    np.testing.assert_allclose(rays[CENTRE_PIXEL], forward, atol=1e-12)


@pytest.mark.parametrize("y_axis,radius", [(5.0, 0.2), (9.0, 0.05), (3.0, 0.3)])
def test_depth_of_cylinder_straight_ahead(batched, bullet, y_axis: float, radius: float) -> None:
    """A vertical cylinder on the flight line: the optical axis meets its front at
    y = y_axis − r, so the z-depth is (y_axis − r − cam_y) / cos(pitch).

    PyBullet draws the cylinder as a polygonal prism, so its depth may lie behind the true
    surface by up to r·(1 − cos(π/n)); n ≥ 12 sides bounds that by 0.035·r.
    """
    scene = scene_with([((0.0, y_axis, 0.0), (0.0, 0.0, 1.0), radius)])
    start = np.array(spec.START)
    cam_y = start[1] + spec.CAM_OFFSET[1]
    expected = (y_axis - radius - cam_y) / math.cos(math.radians(spec.CAM_PITCH_DEG))
    batched.load(scene)
    ours = batched.render(start)
    assert ours[CENTRE_PIXEL] == pytest.approx(expected, abs=1e-4)
    bullet.load(scene)
    got = bullet.render(start)[CENTRE_PIXEL]
    assert expected - 1e-3 <= got <= expected + 0.035 * radius + 1e-3


def test_depth_of_floor_and_far_value(batched) -> None:
    """Bottom-row rays hit the floor at z-depth (cam_z) / (−d_z); a clear line of sight along the
    tunnel reads the far value."""
    scene = scene_with([])
    start = np.array(spec.START)
    batched.load(scene)
    img = batched.render(start)
    rays = spec.pixel_rays().reshape(spec.IMG, spec.IMG, 3)
    cam_z = start[2] + spec.CAM_OFFSET[2]
    d = rays[49, 25]
    assert img[49, 25] == pytest.approx(cam_z / -d[2], rel=1e-5)
    assert img[CENTRE_PIXEL] == spec.FAR


def test_primitives_start_at_zero_and_end_at_offsets() -> None:
    offs = spec.primitive_offsets()
    for k in range(spec.N_PRIMS):
        np.testing.assert_array_equal(prims.displacement(k, 0.0), [0.0, 0.0, 0.0])
        end = prims.displacement(k, 1.0)
        np.testing.assert_array_equal(end, [offs[k, 0], spec.SPEED, offs[k, 1]])
    # monotone and symmetric: s(t) + s(1 − t) = 1
    t = np.linspace(0, 1, 101)
    s = prims.s_curve(t)
    assert np.all(np.diff(s) > 0)
    np.testing.assert_allclose(s + s[::-1], 1.0, atol=1e-12)
    assert len(prims.check_times()) * spec.N_STEPS == 240


def _first_check(t_star: float) -> int:
    return math.ceil(t_star / spec.CHECK_DT - 1e-9)


@pytest.mark.parametrize(
    "start,prim,threshold_axis,threshold",
    [
        ((4.0, 0.0, 2.0), 22, 0, 0.7),  # dx = +1 into the wall x = 5: x + 0.3 reaches 5 at s = 0.7
        ((-3.9, 0.0, 2.0), 2, 0, 0.8),  # dx = −1 into x = −5
        ((0.0, 0.0, 3.0), 14, 2, 0.7),  # dz = +1 into the ceiling
        ((0.0, 0.0, 0.9), 10, 2, 0.6),  # dz = −1 into the floor: z − 0.3 reaches 0 at s = 0.6
    ],
)
def test_primitive_into_wall_collides_at_computed_time(
    batched, bullet, start, prim: int, threshold_axis: int, threshold: float
) -> None:
    scene = scene_with([])
    expected = _first_check(prims.s_inverse(threshold))
    assert 1 <= expected <= 20
    batched.load(scene)
    assert batched.sweep(np.array(start), prim) == expected
    bullet.load(scene)
    assert bullet.sweep(np.array(start), prim) == expected


def test_primitive_into_cylinder_collides_at_computed_time(batched, bullet) -> None:
    """Straight at a vertical cylinder (axis y = 2.6, r = 0.2): the sphere touches it when
    y + 0.3 = 2.4, i.e. t = (2.1 − 1.0) / 1.25 = 0.88 s -> check 18."""
    scene = scene_with([((0.0, 2.6, 0.0), (0.0, 0.0, 1.0), 0.2)])
    start = np.array([0.0, 1.0, 2.0])
    batched.load(scene)
    assert batched.sweep(start, STRAIGHT) == 18
    bullet.load(scene)
    assert bullet.sweep(start, STRAIGHT) == 18


def test_point_cylinder_distance_caps_and_rim() -> None:
    c = np.array([[0.0, 0.0, 0.0]])
    a = np.array([[0.0, 0.0, 1.0]])
    r = np.array([0.5])
    pts = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 7.0], [3.5, 0.0, 9.0], [0.1, 0.0, 1.0]])
    d = point_cylinder_distance(pts, c, a, r)[:, 0]
    np.testing.assert_allclose(d, [1.5, 2.0, 5.0, 0.0])


def test_scene_is_deterministic_and_safe() -> None:
    for seed in range(30):
        a, b = sample_scene(seed), sample_scene(seed)
        np.testing.assert_array_equal(a.centres, b.centres)
        np.testing.assert_array_equal(a.radii, b.radii)
        d = point_cylinder_distance(np.array(spec.START), a.centres, a.axes, a.radii)
        assert d.min() >= spec.START_CLEARANCE
        assert np.all((a.radii >= 0.05) & (a.radii <= 0.30))
        assert np.all(np.abs(a.centres[:, 0]) <= 5) and np.all(a.centres[:, 1] >= 0)
        np.testing.assert_allclose(np.linalg.norm(a.axes, axis=1), 1.0)
    assert not np.array_equal(sample_scene(1).centres, sample_scene(2).centres)
    with pytest.raises(PacplanError):
        sample_scene(-1)


def test_tilt_distribution_matches_design() -> None:
    """q = normalize([N, 0, N, 1]) tilts the axis with a median near 50° (DESIGN.md)."""
    tilts = np.concatenate(
        [np.degrees(np.arccos(np.abs(sample_scene(s).axes[:, 2]))) for s in range(100)]
    )
    assert 45 < np.median(tilts) < 55


def test_bullet_images_do_not_show_the_robot(bullet) -> None:
    """PyBullet renders shapes without visuals from their collision shape: a collision check
    that left the robot sphere 2 m ahead must not appear in the next image (a bug the
    closed-loop cross-validation caught)."""
    scene = sample_scene(31)
    bullet.load(scene)
    start = np.array(spec.START)
    before = bullet.render(start)
    bullet.collides(start + np.array([0.0, 2.0, 0.0]))
    np.testing.assert_array_equal(bullet.render(start), before)
