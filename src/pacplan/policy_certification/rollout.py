"""Rolling imported policies out on seeded environments, as the `gym` world rolls out its own.

Environment seed s is `env.reset(seed=s)` with the action space seeded with s too, and an
episode runs until it terminates, is truncated, or reaches the world's horizon: the `gym`
world's own loop (`pacplan.worlds.from_gym.episodes`), so a cost rule means the same for a
policy pacplan trained and for one trained elsewhere. The cost of each episode is the world's
(`GymWorld.episode_costs`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.user_code import calling_user_code
from pacplan.policy_certification.policies import ImportedPolicy
from pacplan.worlds.from_gym.costs import Episode
from pacplan.worlds.from_gym.episodes import Step, lockstep_episodes
from pacplan.worlds.from_gym.steps import check_observation, checked_action, checked_step
from pacplan.worlds.from_gym.world import GymWorld

NO_WEIGHTS = "pacplan.policy_certification.rollout:no_weights"
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


def rollout(world: GymWorld, env: Any, policy: ImportedPolicy, seed: int,
            clip_actions: bool = False) -> tuple[Episode, int]:
    """(one episode of `policy` on environment `seed`, the number of its actions clipped into
    the action space): the `gym` world's episode loop (`lockstep_episodes`), with every
    failure of the policy or of the environment, and everything they hand over that is not
    what Gymnasium's API says (`pacplan.worlds.from_gym.steps`), one line naming the policy
    or the environment, the seed and the step."""
    with calling_user_code(f"{world.env_id} failed to reset with seed {seed}"):
        first, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
    clipped = [0]

    def observe(_j: int, obs: Any, where: str) -> Any:
        with _named(f"{world.env_id} gave an observation {where}: "):
            check_observation(obs)
        return obs

    def act(_alive: list[int], obs: list[Any], where: str) -> list[Any]:
        with calling_user_code(f"policy {policy.label} failed {where}"):
            try:
                return [policy.act(obs[0])]
            except PacplanError as exc:
                raise PacplanError(f"{exc} ({where.removeprefix('on ')})") from None

    def step(_j: int, action: Any, where: str) -> Step:
        with _named(f"policy {policy.label} {where}: "):
            action, was_clipped = checked_action(action, env.action_space, clip_actions)
        clipped[0] += was_clipped
        with _named(f"{world.env_id} (policy {policy.label}) {where}: "):
            return checked_step(env, action)

    (episode,) = lockstep_episodes([env], [first], seed, world.horizon, observe, act, step)
    return episode, clipped[0]


@contextlib.contextmanager
def _named(prefix: str) -> Iterator[None]:
    """A check's `PacplanError`, prefixed with whose output it was."""
    try:
        yield
    except PacplanError as exc:
        raise PacplanError(prefix + str(exc)) from None


def cost_rows(world: GymWorld, env: Any, policies: Sequence[ImportedPolicy],
              seeds: Sequence[int], done_row: Callable[[], None] | None = None,
              clip_actions: bool = False, clipped: list[int] | None = None) -> np.ndarray:
    """(len(seeds), len(policies)) costs: row i holds every policy's cost on seeds[i];
    `clipped[0]` counts the actions clipped into the action space (with `clip_actions`)."""
    out = np.empty((len(seeds), len(policies)), dtype=np.float64)
    for i, seed in enumerate(seeds):
        episodes = []
        for p in policies:
            episode, n_clipped = rollout(world, env, p, int(seed), clip_actions)
            episodes.append(episode)
            if clipped is not None:
                clipped[0] += n_clipped
        out[i] = world.episode_costs(episodes, int(seed))
        if done_row is not None:
            done_row()
    return out
