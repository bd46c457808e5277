"""Policies a user would write (`module:callable`, obs -> action), for certify-policy's tests."""

from __future__ import annotations

import numpy as np


def balance(obs: np.ndarray) -> int:
    """CartPole: push towards where the pole falls (it balances for long)."""
    return int(obs[2] + 0.5 * obs[3] > 0)


def lean(obs: np.ndarray) -> int:
    """CartPole: push towards the pole's side only (it falls sooner)."""
    return int(obs[2] > 0)


def push_left(obs: np.ndarray) -> int:
    """CartPole: always push left (it falls within a few dozen steps)."""
    return 0


def land_when_told(obs: np.ndarray) -> int:
    """The test lander (`user_costs.Lander`): fire exactly at the step the observation names."""
    return int(round(float(obs[0]) * 10) == round(float(obs[1]) * 10))


def fire_at_once(obs: np.ndarray) -> int:
    """The test lander: fire at the first step (lands only where the window is step 0)."""
    return 1


def broken(obs: np.ndarray) -> int:
    raise RuntimeError("sensor offline")


def make_cartpole():
    """An environment factory (`pacplan.certify_policy` takes one in Python)."""
    import gymnasium as gym

    return gym.make("CartPole-v1", max_episode_steps=60)


def short_episode(episode) -> float:
    """A cost function object: 1 when the pole fell within 30 steps."""
    return float(episode.terminated and episode.length < 30)


THRESHOLD = 0.0
"""What `thresholded` compares the pole's angle with (a script may change it)."""


def thresholded(obs: np.ndarray) -> int:
    """CartPole: push towards the pole's side once its angle passes THRESHOLD."""
    return int(obs[2] > THRESHOLD)


MODEL = None
"""A model a script loads at import (`with_model` reads it; tests set it)."""


def with_model(obs: np.ndarray) -> int:
    """CartPole: the global MODEL's deterministic action."""
    return int(MODEL.predict(obs, deterministic=True)[0])  # type: ignore[attr-defined]
