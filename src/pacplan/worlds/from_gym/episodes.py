"""The one episode loop of a Gymnasium environment, shared by the `gym` world (its own policy
families) and `pacplan certify-policy` (policies trained elsewhere), so a cost rule means the
same for a policy pacplan trained and for one trained elsewhere.

k environments, each already reset with the seed, are stepped in lockstep: at each step every
episode still running has its observation checked and handed to `act` (one batched call), and
its action stepped; an episode ends when it terminates, is truncated or reaches `horizon`
steps. What the caller owns is how an observation is shown to its policy, how a policy acts
and how one step is checked and named in a message: the hooks below.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pacplan.worlds.from_gym.costs import Episode

Step = tuple[Any, float, bool, bool, Any]
"""(observation, reward, terminated, truncated, info), checked."""


def lockstep_episodes(envs: Sequence[Any], first: Sequence[Any], seed: int, horizon: int,
                      observe: Callable[[int, Any, str], Any],
                      act: Callable[[list[int], list[Any], str], Sequence[Any]],
                      step: Callable[[int, Any, str], Step]) -> list[Episode]:
    """One episode on each of `envs` (reset: `first` their first observations).

    Each hook gets `where` ('on seed 7 at step 3') for its messages: `observe(j, raw, where)`
    is episode j's observation as its policy sees it (checked); `act(alive, observations,
    where)` the actions of the episodes `alive`; `step(j, action, where)` episode j's checked
    step. The episodes still running are all at the same step."""
    k = len(envs)
    total, last_reward = [0.0] * k, [0.0] * k
    terminated, truncated = [False] * k, [False] * k
    length, infos = [0] * k, [{} for _ in range(k)]
    raw, alive = list(first), list(range(k))
    for t in range(horizon):
        where = f"on seed {seed} at step {t}"
        actions = act(alive, [observe(j, raw[j], where) for j in alive], where)
        still = []
        for j, a in zip(alive, actions, strict=True):
            raw[j], r, terminated[j], truncated[j], infos[j] = step(j, a, where)
            total[j] += r
            last_reward[j], length[j] = r, t + 1
            if not (terminated[j] or truncated[j]):
                still.append(j)
        alive = still
        if not alive:
            break
    return [Episode(seed=seed, total_return=float(total[j]), last_reward=float(last_reward[j]),
                    terminated=bool(terminated[j]), truncated=bool(truncated[j]),
                    length=int(length[j]), info=infos[j]) for j in range(k)]
