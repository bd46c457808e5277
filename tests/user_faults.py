"""User code that misbehaves the ways round four of the trust tests found (issue 50): policies
and environments that hand over the wrong kinds of values, or end the process."""

from __future__ import annotations

import sys
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

FAULTS = ("array-reward", "none-reward", "complex-reward", "string-reward", "nan-reward",
          "array-terminated", "int-terminated", "info-none", "nan-observation",
          "success-string", "success-array", "success-half", "exit-in-step", "short-step")
"""Each a way `Faulty.step` breaks Gymnasium's API (the first step does it)."""


class Faulty(gym.Env):
    """A 3-step environment with 2 actions that breaks the API as `fault` says."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, fault: str = "none") -> None:
        self.fault, self.t = fault, 0

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        obs = np.zeros(2, np.float32)
        reward: Any = 1.0
        terminated: Any = self.t >= 3
        info: Any = {"is_success": terminated}
        fault = self.fault
        if fault == "exit-in-step":
            sys.exit(0)
        if fault == "short-step":
            return obs, reward, terminated, info
        replacements = {"array-reward": ("reward", np.array([1.0, 2.0])),
                        "none-reward": ("reward", None), "complex-reward": ("reward", 1 + 2j),
                        "string-reward": ("reward", "1.0"), "nan-reward": ("reward", np.nan),
                        "array-terminated": ("terminated", np.array([False, True])),
                        "int-terminated": ("terminated", 0), "info-none": ("info", None),
                        "nan-observation": ("obs", np.array([np.nan, 0.0], np.float32)),
                        "success-string": ("info", {"is_success": "False"}),
                        "success-array": ("info", {"is_success": np.array([True, False])}),
                        "success-half": ("info", {"is_success": 0.5})}
        if fault in replacements:
            name, value = replacements[fault]
            if name == "reward":
                reward = value
            elif name == "terminated":
                terminated = value
            elif name == "info":
                info = value
            else:
                obs = value
        return obs, reward, terminated, False, info


def register_faulty() -> dict[str, str]:
    """{fault: env id} of `Faulty` registered once per fault."""
    ids = {}
    for fault in FAULTS:
        env_id = f"pacplan-test/Faulty-{fault}-v0"
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=Faulty, max_episode_steps=3,
                         kwargs={"fault": fault})
        ids[fault] = env_id
    return ids


def exits(obs: Any) -> int:
    """A policy that ends the process the polite way."""
    sys.exit(0)


def exits_cost(episode: Any) -> float:
    sys.exit(0)


def huge_cost(episode: Any) -> int:
    return 10**400


def nan_torque(obs: Any) -> np.ndarray:
    """Pendulum: a NaN torque."""
    return np.array([np.nan], np.float32)


def inf_torque(obs: Any) -> np.ndarray:
    return np.array([np.inf], np.float32)


def strong_torque(obs: Any) -> np.ndarray:
    """Pendulum: 5 N·m where the space allows 2 (the env would clip it)."""
    return np.array([5.0], np.float32)


def max_torque(obs: Any) -> np.ndarray:
    """Pendulum: the largest torque the space allows (what `strong_torque` clips to)."""
    return np.array([2.0], np.float32)


def two_torques(obs: Any) -> np.ndarray:
    return np.array([1.0, 1.0], np.float32)


def scalar_torque(obs: Any) -> float:
    return 1.0


def string_torque(obs: Any) -> np.ndarray:
    return np.array(["1.0"])


def float_push(obs: Any) -> float:
    """CartPole: 1.0 where an integer action is needed."""
    return 1.0


def bool_push(obs: Any) -> bool:
    return True


def array_push(obs: Any) -> np.ndarray:
    return np.array([1])


def far_push(obs: Any) -> int:
    return 7


def zero(obs: Any) -> int:
    return 0
