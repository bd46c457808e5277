"""The UAV Gymnasium env follows Gymnasium's conventions (issue 25): an action outside the
action space is an error (never rounded, parsed or taken from a bool), and step() after close()
is a clear error."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import pacplan  # noqa: F401  (registers the env ids)


@pytest.fixture(scope="module")
def env():  # type: ignore[no-untyped-def]
    e = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    e.reset(options={"scene_seed": 1})
    yield e
    e.close()


@pytest.mark.parametrize("action", [2.5, 2.0, "7", True, False, np.bool_(True), -1, 25,
                                    np.array([1, 2]), None, np.float64(3.0)])
def test_an_action_outside_the_space_is_an_error(env, action) -> None:  # type: ignore[no-untyped-def]
    checks = int(env.state.checks), int(env.state.step)
    with pytest.raises(ValueError, match="action"):
        env.step(action)
    assert (int(env.state.checks), int(env.state.step)) == checks  # nothing flown


@pytest.mark.parametrize("action", [7, np.int64(7), np.array(7)])
def test_integer_actions_fly(action) -> None:  # type: ignore[no-untyped-def]
    e = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    e.reset(options={"scene_seed": 1})
    e.step(action)
    assert int(e.state.step) == 1
    e.close()


def test_step_after_close_is_a_clear_error() -> None:
    e = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    e.reset(options={"scene_seed": 1})
    e.close()
    with pytest.raises(RuntimeError, match="closed"):
        e.step(3)
    e.reset(options={"scene_seed": 1})  # a reset opens it again
    e.step(3)
    e.close()


def test_minitaur_actions_outside_the_box_are_errors() -> None:
    e = gym.make("pacplan/MinitaurTerrain-v0").unwrapped
    e.reset(options={"terrain_seed": 1})
    for action in ([0.5, 0.5, 0.5, 1.5], [np.nan] * 4, [0.5] * 3, "0.5", [-0.1, 0, 0, 0]):
        with pytest.raises(ValueError, match="action space"):
            e.step(action)
    e.step(np.full(4, 0.5, np.float32))  # inside: flies
    e.close()
    with pytest.raises(gym.error.ResetNeeded):
        e.step(np.full(4, 0.5, np.float32))
