"""The Gymnasium env passes the official checker and its return is minus the world's cost."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import pacplan  # noqa: F401  (registers the env ids)
from pacplan.worlds.uav import UAVWorld, spec
from pacplan.worlds.uav.policy_np import NumpyPolicy


@pytest.mark.parametrize("simulator", ["batched", "bullet"])
def test_check_env(simulator: str) -> None:
    env = gym.make("pacplan/UAVObstacleField-v0", simulator=simulator)
    check_env(env.unwrapped)
    env.close()


def test_return_is_minus_world_cost() -> None:
    env = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    policy = NumpyPolicy(None)
    world = UAVWorld(use_net=False, compile=False)
    for seed in range(4):
        obs, _ = env.reset(options={"scene_seed": seed})
        assert obs.shape == (spec.IMG, spec.IMG)
        total, done = 0.0, False
        while not done:
            obs, reward, done, _, _ = env.step(policy.choose(obs))
            total += reward
        cost = world.costs(np.zeros((1, spec.POLICY_DIM)), [seed])[0, 0]
        assert -total == pytest.approx(cost)
