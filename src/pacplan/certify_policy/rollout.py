"""Rolling imported policies out on seeded environments, as the `gym` world rolls out its own.

Environment seed s is `env.reset(seed=s)` with the action space seeded with s too, and an
episode runs until it terminates, is truncated, or reaches the world's horizon: exactly the
`gym` world's episode, so a cost rule means the same for a policy pacplan trained and for one
trained elsewhere. The cost of each episode is the world's (`GymWorld.episode_costs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from pacplan.certify_policy.policies import ImportedPolicy
from pacplan.errors import PacplanError
from pacplan.worlds.gym_costs import Episode
from pacplan.worlds.gym_world import GymWorld

NO_WEIGHTS = "pacplan.certify_policy.rollout:no_weights"
"""The `gym` world's policy option for a world that only declares the environment and its
cost here: imported policies carry their own weights."""


class _NoWeights:
    """A policy family for any spaces that is never asked to act."""

    dim = 1

    def act(self, thetas: np.ndarray, obs: np.ndarray) -> Any:
        raise PacplanError("certify-policy rolls out imported policies, not weight vectors")


def no_weights(observation_space: Any, action_space: Any) -> _NoWeights:
    """The factory named by `NO_WEIGHTS`."""
    return _NoWeights()


def _reason(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return type(exc).__name__ + (f": {text[:200]}" if text else "")


def rollout(world: GymWorld, env: Any, policy: ImportedPolicy, seed: int) -> Episode:
    """One episode of `policy` on environment `seed`; a failure of the policy or of the
    environment is one line naming both and the seed."""
    try:
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
    except Exception as exc:
        raise PacplanError(f"{world.env_id} failed to reset with seed {seed} "
                           f"({_reason(exc)})") from None
    total, reward, terminated, truncated, length, info = 0.0, 0.0, False, False, 0, {}
    for _ in range(world.horizon):
        try:
            action = policy.act(obs)
        except PacplanError as exc:
            raise PacplanError(f"{exc} (seed {seed})") from None
        except Exception as exc:
            raise PacplanError(f"policy {policy.label} failed on seed {seed} at step {length} "
                               f"({_reason(exc)})") from None
        try:
            obs, r, terminated, truncated, info = env.step(action)
        except Exception as exc:
            raise PacplanError(f"{world.env_id} refused action {action!r} of policy "
                               f"{policy.label} on seed {seed} at step {length} "
                               f"({_reason(exc)})") from None
        reward, length = float(r), length + 1
        total += reward
        if terminated or truncated:
            break
    return Episode(seed=seed, total_return=total, last_reward=reward,
                   terminated=bool(terminated), truncated=bool(truncated), length=length,
                   info=info if isinstance(info, dict) else {})


def cost_rows(world: GymWorld, env: Any, policies: Sequence[ImportedPolicy],
              seeds: Sequence[int], done_row: Callable[[], None] | None = None) -> np.ndarray:
    """(len(seeds), len(policies)) costs: row i holds every policy's cost on seeds[i]."""
    out = np.empty((len(seeds), len(policies)), dtype=np.float64)
    for i, seed in enumerate(seeds):
        episodes = [rollout(world, env, p, int(seed)) for p in policies]
        out[i] = world.episode_costs(episodes, int(seed))
        if done_row is not None:
            done_row()
    return out
