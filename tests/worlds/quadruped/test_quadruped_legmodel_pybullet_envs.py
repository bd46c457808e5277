"""Optional: our leg model against pybullet_envs' Minitaur `ConvertFromLegModel`.

pybullet_envs needs gym 0.25.2 and protobuf 3.20.3, which are not dependencies of pacplan; the
test is skipped when its Minitaur modules cannot be imported.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import numpy as np
import pytest

from pacplan.worlds.quadruped.gait import GaitParams, gait_actions, leg_model_to_motor_angles

pytestmark = pytest.mark.optional


def _minitaur_classes() -> list[type]:
    classes = []
    for name in ("pybullet_envs.minitaur.envs.minitaur", "pybullet_envs.bullet.minitaur"):
        try:
            classes.append(importlib.import_module(name).Minitaur)
        except Exception as exc:  # gym / protobuf missing or incompatible
            pytest.skip(f"pybullet_envs Minitaur not importable: {exc!r}")
    return classes


def test_motor_angles_match_pybullet_envs() -> None:
    rng = np.random.default_rng(0)
    actions = np.concatenate(
        [
            rng.uniform(-1.0, 1.0, (200, 8)),
            np.eye(8),
            -np.eye(8),
            np.zeros((1, 8)),
            gait_actions(GaitParams(0.7, 0.4, 0.2, 30.0), np.linspace(0, 7, 50)),
        ]
    )
    ours = leg_model_to_motor_angles(actions)
    for cls in _minitaur_classes():
        robot = SimpleNamespace(num_motors=8)
        theirs = np.array([cls.ConvertFromLegModel(robot, list(a)) for a in actions])
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12)
