"""UAV world options `obstacles` and `radius_scale` (shifted worlds for docs/monitor.md): the
defaults draw the certified world exactly as before; the options change what they say."""

from __future__ import annotations

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds.uav import UAVWorld, spec
from pacplan.worlds.uav.scene import sample_scene


def test_defaults_are_the_certified_world() -> None:
    for seed in (0, 7, 200_000):
        a, b = sample_scene(seed), sample_scene(seed, spec.N_OBSTACLES, 1.0)
        for name in ("centres", "axes", "radii", "quats"):
            assert np.array_equal(getattr(a, name), getattr(b, name))
    world = UAVWorld()
    assert (world.obstacles, world.radius_scale) == (20, 1.0)
    assert UAVWorld(**world.options()).options() == world.options()


def test_more_and_wider_obstacles() -> None:
    wide = [sample_scene(s, radius_scale=2.0) for s in range(50)]
    base = [sample_scene(s) for s in range(50)]
    assert all(sc.radii.shape == (20,) for sc in wide)
    assert all(spec.OBST_RADIUS[0] * 2 <= sc.radii.min() and sc.radii.max() <= 0.6
               for sc in wide)
    assert np.mean([sc.radii.mean() for sc in wide]) > 1.8 * np.mean(
        [sc.radii.mean() for sc in base])
    many = sample_scene(3, obstacles=30)
    assert many.centres.shape == (30, 3) and many.radii.shape == (30,)
    sim = UAVWorld(obstacles=30, compile=False).sim
    assert sim.scene_options == {"obstacles": 30, "radius_scale": 1.0}


@pytest.mark.parametrize("options", [{"obstacles": 0}, {"obstacles": 2.5},
                                     {"obstacles": True}, {"radius_scale": 0.0},
                                     {"radius_scale": float("nan")},
                                     {"simulator": "bullet", "obstacles": 30}])
def test_bad_shift_options_are_refused(options: dict) -> None:
    with pytest.raises(PacplanError):
        UAVWorld(**options)
