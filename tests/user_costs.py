"""Cost functions a user would write (`cost: user_costs:<name>`), for the gym-cost tests, and a
tiny landing environment whose last info names the outcome."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from pacplan.worlds.from_gym.costs import Episode

SEEN: list[Episode] = []


def short_is_bad(episode: Episode) -> float:
    """1 − length/horizon for a 10-step horizon: a cost computed from the record."""
    SEEN.append(episode)
    return 1.0 - episode.length / 10


def not_landed(episode: Episode) -> bool:
    """A bool is a number: True (1) unless the last info says landed."""
    return not episode.info.get("landed", False)


def too_big(episode: Episode) -> float:
    return 1.5 if episode.seed == 3 else 0.0


def nan_cost(episode: Episode) -> float:
    return float("nan")


def words(episode: Episode) -> str:
    return "bad"


def raises(episode: Episode) -> float:
    raise KeyError("altitude")


NOT_CALLABLE = 0.5


class Lander(gym.Env):
    """Lands (info landed, terminated) when action 1 is taken at the seed's step, crashes
    (terminated, landed False) on action 1 at any other step, else hovers (info hovering) until
    the limit. Reward −1 per step, +10 on landing."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t, self.window = 0, int(self.np_random.integers(0, 4))
        return self._obs(), {}

    def _obs(self) -> np.ndarray:
        return np.array([self.t / 10, self.window / 10], np.float32)

    def step(self, action: int):
        self.t += 1
        if int(action) == 1:
            landed = self.t - 1 == self.window
            return (self._obs(), 10.0 if landed else -1.0, True, False,
                    {"landed": landed, "hovering": False})
        return self._obs(), -1.0, False, False, {"landed": False, "hovering": True}


def register_lander() -> str:
    env_id = "pacplan-test/Lander-v0"
    if env_id not in gym.registry:
        gym.register(env_id, entry_point=Lander, max_episode_steps=10)
    return env_id

