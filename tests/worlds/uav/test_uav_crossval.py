"""Batched simulator vs the PyBullet oracle: depth, replayed collision times, closed-loop costs.

The fast test runs a few seeds × policies on every `pytest -q`; the slow one is the issue's
≥ 50 seeds × ≥ 20 policies (also printed with explanations by benchmarks/uav_crossval.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from pacplan.worlds.uav import crossval


def _check(out: dict, replay_min: float, depth_p99: float) -> None:
    d = out["depth"]
    assert d["median_abs_err_m"] < 1e-3
    assert d["p99_abs_err_m"] < depth_p99
    # large errors are silhouette pixels (renderer sampling vs exact ray casting)
    assert d["share_of_those_on_depth_edges"] > 0.9
    for rep in out["replay"].values():
        assert rep["share_same_collision_time"] >= replay_min
        # any disagreement is a graze: the robot surface within 2 cm of a shape
        for dis in rep["disagreements"]:
            assert abs(dis["clearance_at_earlier_check_m"]) < 0.02
    cl = out["closed_loop"]
    assert abs(cl["mean_cost_diff_pp"]) <= 1.0
    for dis in cl["disagreements"]:
        # the flights part where the two images differ (silhouette pixels) and the two best
        # scores were close: one pixel moves a 5x5 cell mean by at most 20 m / 25 = 0.8 m
        assert dis["first_different_step"] is not None
        assert dis["image_pixels_over_10cm"] >= 1
        assert dis["choices_follow_images"]
        assert abs(dis["score_margin_m"]) < 0.8 * dis["image_pixels_over_10cm"] + 0.5


def test_crossval_small() -> None:
    out = crossval.run(np.arange(500, 504), crossval.test_policies(3))
    _check(out, replay_min=1.0, depth_p99=0.05)
    assert out["closed_loop"]["share_identical_cost"] >= 0.9


@pytest.mark.slow
def test_crossval_50_seeds_20_policies() -> None:
    out = crossval.run(np.arange(50), crossval.test_policies(20), compile=True)
    assert out["seeds"] >= 50 and out["policies"] >= 20
    _check(out, replay_min=0.99, depth_p99=0.05)
    assert out["closed_loop"]["share_identical_cost"] >= 0.95
