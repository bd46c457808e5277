"""Any registered Gymnasium environment as a pacplan world, so users certify their own robots.

Environment seed s is `env.reset(seed=s)` (the action space is seeded with s too), after an
optional user function `randomize(env, s)` that sets the environment's parameters (masses,
terrain) from s alone. A policy θ is a flat weight vector of a family in
`pacplan.worlds.from_gym.policies` (linear, MLP, or the user's `module:factory`) acting on the
flattened observation; an episode runs until it terminates, is truncated, or reaches `horizon`
steps.

The cost is declared, not guessed (`cost`):
- "return" (default): with `return_bounds = [R_min, R_max]` the cost of return R is
  (R_max − R)/(R_max − R_min) ∈ [0, 1]. A return outside the declared bounds is an error naming
  the seed and the value, never clipped: a clipped cost would silently void the certificate.
  Instead of `return_bounds`, `reward_bounds = [r_min, r_max]` per step (or the env's own
  finite `reward_range`) gives them over the horizon (`pacplan.worlds.from_gym.bounds`).
- "terminated": 1 if the episode terminated (the environment's failure: fell, crashed) before
  the horizon, else 0 — the probability of failure is what is certified.
- "success": 0 if the last step's `info[success_key]` is truthy (`is_success` by default, the
  goal-reaching tasks' convention in Gymnasium-Robotics), else 1; with
  `success_needs_terminated` the episode must also have terminated (not run out of time);
- "module:function": the user's function of the finished episode (`pacplan.worlds.from_gym.costs.
  Episode`: seed, return, last reward, terminated, truncated, length, last info), a number in
  [0, 1]; anything else, or an exception, is an error naming the seed and the function.

The k policies of one call are stepped in lockstep on k copies of the environment (one batched
policy evaluation per step). Environments are built lazily and dropped when pickled, so the world
travels to worker processes as its options only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacplan.errors import CostRangeError, PacplanError
from pacplan.io.user_code import calling_user_code
from pacplan.validation import (
    check_choice,
    check_int,
    check_policies,
    check_real,
    check_seeds,
    check_unit_costs,
)
from pacplan.worlds.from_gym.bounds import declared_reward_range, return_bounds_from_rewards
from pacplan.worlds.from_gym.costs import BUILTIN_COSTS, CostRule, Episode, cost_rule, episode_cost
from pacplan.worlds.from_gym.episodes import lockstep_episodes
from pacplan.worlds.from_gym.policies import PolicyFamily, make_policy
from pacplan.worlds.from_gym.steps import check_observation, checked_action, checked_step
from pacplan.worlds.from_gym.wording import CONFIG, Wording

COST_RULES: tuple[str, ...] = BUILTIN_COSTS
"""The built-in ways an episode becomes a cost in [0, 1] (besides 'module:function')."""

MAX_LOCKSTEP = 64
"""At most this many environment copies step together (memory stays bounded for big thetas)."""


@dataclass(frozen=True)
class Episodes:
    """k episodes on one environment: undiscounted returns, whether each terminated (rather than
    being truncated at the horizon), and each one's `Episode` record (last reward and info)."""

    returns: np.ndarray
    terminated: np.ndarray
    records: tuple[Episode, ...]

    @classmethod
    def of(cls, records: Sequence[Episode]) -> Episodes:
        """The episodes of these records."""
        return cls(np.array([e.total_return for e in records], dtype=np.float64),
                   np.array([e.terminated for e in records], dtype=bool), tuple(records))


def declared_return_bounds(return_bounds: Sequence[float] | None,
                           words: Wording = CONFIG) -> tuple[float | None, float | None]:
    """(R_min, R_max) as declared and checked, or (None, None) where none are given."""
    if return_bounds is None:
        return None, None
    what = words("return_bounds")
    if not isinstance(return_bounds, list | tuple) or len(return_bounds) != 2:
        raise PacplanError(f"{what} must be {words.return_pair}, got {return_bounds!r}")
    lo, hi = (check_real(b, what) for b in return_bounds)
    if not lo < hi:
        raise PacplanError(f"{what} must have R_min < R_max, got [{lo}, {hi}]")
    if not math.isfinite(hi - lo):  # every cost (R_max − R)/∞ would be 0
        raise PacplanError(f"{what} [{lo}, {hi}] span more than a float holds: "
                           "every cost would be 0; declare the returns' real range")
    return lo, hi


class GymWorld:
    """A Gymnasium environment id + policy family + horizon + declared return bounds."""

    name = "gym"

    def __init__(
        self,
        env_id: str,
        return_bounds: Sequence[float] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        policy: str = "linear",
        hidden: int = 16,
        horizon: int | None = None,
        randomize: str | None = None,
        cost: str = "return",
        reward_bounds: Sequence[float] | None = None,
        success_key: str | None = None,
        success_needs_terminated: bool = False,
    ) -> None:
        words = self._words = getattr(self, "_words", CONFIG)  # `spelled` sets another
        if ":" not in str(cost):
            check_choice(words("cost"), cost, COST_RULES)
        self.cost = cost
        self.success_key = success_key
        self.success_needs_terminated = success_needs_terminated
        self._rule = cost_rule(cost, success_key, success_needs_terminated, words)
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self.policy = policy
        self.hidden = check_int(hidden, words("hidden"), minimum=1)
        if return_bounds is not None and reward_bounds is not None:
            raise PacplanError(f"{words.both('return_bounds', 'reward_bounds')}: give one "
                               f"({words.name('reward_bounds')} per step gives "
                               f"{words.name('return_bounds')} over the horizon)")
        self.reward_bounds = reward_bounds
        self.r_min, self.r_max = declared_return_bounds(return_bounds, words)
        self.bounds_from = "declared" if return_bounds is not None else None
        self.randomize = randomize
        self._envs: list[Any] = []
        self._policy: PolicyFamily | None = None
        self._randomize_fn: Callable[[Any, int], Any] | None = None
        spec_steps = self._spec_steps()
        if horizon is None and spec_steps is None:
            raise PacplanError(f"{words('horizon')} is needed: {env_id!r} has no episode "
                               "length")
        self.horizon = check_int(horizon if horizon is not None else spec_steps,
                                 words("horizon"), minimum=1)
        self._family()  # build one env and the policy now, so bad options fail at once
        if self.cost == "return" and self.r_min is None:
            self._derive_bounds(words)

    def _derive_bounds(self, words: Wording) -> None:
        """return_bounds from per-step reward bounds: the user's, else the env's own."""
        per_step, self.bounds_from = self.reward_bounds, "reward_bounds"
        if per_step is None:
            per_step, self.bounds_from = declared_reward_range(self._pool(1)[0]), "reward_range"
        if per_step is None:
            cost = words.name("cost")
            raise PacplanError(f"{words('return_bounds')} {words.return_pair} is needed for "
                               f"{cost} 'return' ({self.env_id} declares no finite "
                               f"reward_range): give them, or {words.name('reward_bounds')} "
                               f"{words.reward_pair} per step (or choose {cost} 'terminated' "
                               "or 'success')")
        self.r_min, self.r_max = return_bounds_from_rewards(per_step, self.horizon,
                                                            words(self.bounds_from),
                                                            words.reward_pair)

    @staticmethod
    def cost_is_return(cost: str = "return", **_: Any) -> bool:
        """Whether options make the cost a rescaled return (a report then states each bound
        as a return: `pacplan.worlds.base.return_range`)."""
        return cost == "return"

    @classmethod
    def spelled(cls, words: Wording, env_id: str, factory: Callable[[], Any] | None = None,
                **options: Any) -> GymWorld:
        """A world whose errors name its options as its caller spells them (`words`:
        `pacplan.certify_policy`'s flags or keywords). With `factory` its environments come
        from `factory()` instead of Gymnasium's registry (an environment object), `env_id`
        standing for its id; such a world stays in its process (a factory is not an option a
        worker can rebuild)."""
        world = cls.__new__(cls)
        world._words = words
        if factory is not None:
            world._factory = factory
        world.__init__(env_id, **options)  # type: ignore[misc]
        return world

    def registered_id(self) -> str:
        """The id in Gymnasium's registry. 'module:EnvId' names the module that registers it,
        imported first as `gym.make` does (here through the user-code boundary, so a module
        that fails to import is one line, and in every worker process too)."""
        module, sep, name = self.env_id.rpartition(":")
        if not sep or getattr(self, "_factory", None) is not None:
            return self.env_id
        if not (module and name):
            raise PacplanError(f"{self._words('env_id')} {self.env_id!r} must be an id or "
                               "'module:EnvId'")
        from pacplan.io.user_code import import_module

        import_module(module, f"{self._words('env_id')} {self.env_id!r}")
        return name

    def _spec_steps(self) -> int | None:
        import gymnasium as gym

        if getattr(self, "_factory", None) is not None:
            spec = getattr(self._pool(1)[0], "spec", None)
            return getattr(spec, "max_episode_steps", None)

        try:
            return gym.spec(self.registered_id()).max_episode_steps
        except gym.error.Error as exc:
            raise PacplanError(f"{self._words('env_id')} {self.env_id!r}: {exc}") from None

    # -- lazily built state (dropped when pickled) ------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state.update(_envs=[], _policy=None, _randomize_fn=None, _rule=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)  # a worker resolves the cost function itself
        self._rule = cost_rule(self.cost, self.success_key, self.success_needs_terminated,
                               self.__dict__.setdefault("_words", CONFIG))

    def _make_env(self) -> Any:
        import gymnasium as gym

        if getattr(self, "_factory", None) is not None:
            return self._factory()

        try:
            return gym.make(self.registered_id(), max_episode_steps=self.horizon,
                            disable_env_checker=True, **self.env_kwargs)
        except PacplanError:
            raise
        except (Exception, SystemExit) as exc:  # an unknown id, a missing extra, a bad kwarg
            from pacplan.io.user_code import reason

            kwargs = " ".join(repr(self.env_kwargs).split())
            kwargs = kwargs if len(kwargs) <= 120 else kwargs[:119] + "…"
            raise PacplanError(f"{self._words.world}cannot make {self.env_id!r} with {kwargs}: "
                               f"{reason(exc)}") from None

    def _pool(self, k: int) -> list[Any]:
        while len(self._envs) < k:
            self._envs.append(self._make_env())
        return self._envs[:k]

    def _family(self) -> PolicyFamily:
        if self._policy is None:
            env = self._pool(1)[0]
            self._policy = make_policy(self.policy, env.observation_space, env.action_space,
                                       self.hidden)
            if self.randomize is not None:
                from pacplan.io.user_code import import_target

                self._randomize_fn = import_target(self.randomize, f"gym world: randomize "
                                                             f"{self.randomize!r}")
        return self._policy

    # -- the World interface ----------------------------------------------------------------------
    def policy_dim(self) -> int:
        return int(self._family().dim)

    def policy_family(self) -> PolicyFamily:
        """The policy family acting here (`pacplan export` asks it for its runtime parts)."""
        return self._family()

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """(k, d) float32 weights × (n,) seeds -> (n, k) float64 costs (R_max − R)/(R_max − R_min).

        Raises `PacplanError` naming the seed and the return when one is outside the bounds.
        """
        th = check_policies(thetas, self.policy_dim(), "gym world: policy weights")
        th = th.astype(np.float64)
        seeds = check_seeds(seeds, "gym world: environment seeds")
        out = np.empty((seeds.size, len(th)), dtype=np.float64)
        for i, seed in enumerate(seeds):
            for j0 in range(0, len(th), MAX_LOCKSTEP):
                episodes = self.episodes(th[j0: j0 + MAX_LOCKSTEP], int(seed))
                out[i, j0: j0 + len(episodes.returns)] = self._cost(episodes, int(seed))
        return check_unit_costs(out, f"gym world {self.env_id}",
                                shape=(seeds.size, len(th)))[0]

    def _cost(self, episodes: Episodes, seed: int) -> np.ndarray:
        """The declared cost of each episode."""
        if self.cost != "return":
            return np.array([episode_cost(self._rule, e) for e in episodes.records],
                            dtype=np.float64)
        assert self.r_min is not None and self.r_max is not None
        for r in episodes.returns:
            if not self.r_min <= r <= self.r_max:
                how = ("" if self.bounds_from == "declared" else
                       f" (from {self.bounds_from} over {self.horizon} steps)")
                raise CostRangeError(
                    f"gym world: {self.env_id} seed {seed} gave return {float(r)!r}, "
                    f"outside the return_bounds [{self.r_min}, {self.r_max}]{how}: the bounds "
                    "are too narrow; widen them (costs are never clipped: that would void the "
                    "certificate)")
        return (self.r_max - episodes.returns) / (self.r_max - self.r_min)

    def use_cost_function(self, label: str, function: Callable[[Episode], Any]) -> None:
        """Cost episodes with a Python function (`pacplan.certify_policy` with a cost object);
        `label` stands for its 'module:function'. Such a world stays in its process."""
        self.cost, self.success_key, self.success_needs_terminated = label, None, False
        self._rule = CostRule("function", target=label, function=function)

    def make_env(self) -> Any:
        """A fresh environment as this world builds its own (id, horizon, env_kwargs), for
        rollouts stepped outside it (`pacplan certify-policy`); reset it with the seed."""
        return self._make_env()

    def episode_costs(self, records: Sequence[Episode], seed: int) -> np.ndarray:
        """The declared cost of episodes run on environment `seed` outside this world (by
        `pacplan certify-policy`), with the same rule and the same errors as `costs`."""
        return self._cost(Episodes.of(records), seed)

    def returns(self, thetas: np.ndarray, seed: int) -> np.ndarray:
        """Undiscounted returns of k policies (k, d) float64 on environment `seed`."""
        return self.episodes(thetas, seed).returns

    def episodes(self, thetas: np.ndarray, seed: int) -> Episodes:
        """Returns, termination and last steps of k policies (k, d) float64 on environment
        `seed`, stepped in lockstep (`pacplan.worlds.from_gym.episodes`)."""
        family = self._family()
        envs = self._pool(len(thetas))
        first = []
        for env in envs:
            if self._randomize_fn is not None:
                with calling_user_code(f"gym world: randomize {self.randomize!r} failed on "
                                       f"seed {seed}"):
                    self._randomize_fn(env, seed)
            with calling_user_code(f"gym world: {self.env_id} failed to reset with seed {seed}"):
                o, _ = env.reset(seed=seed)
                env.action_space.seed(seed)
            first.append(o)

        def act(alive: list[int], obs: list[Any], _where: str) -> Any:
            with calling_user_code(f"gym world: policy {self.policy!r} failed on seed {seed}"):
                return family.act(thetas[alive], np.stack(obs))

        return Episodes.of(lockstep_episodes(
            envs, first, seed, self.horizon,
            lambda j, o, where: self._observed(envs[j], o, where), act,
            lambda j, a, where: self._step(envs[j], a, where)))

    def _step(self, env: Any, action: Any, where: str) -> tuple[Any, float, bool, bool, Any]:
        """One checked `env.step` (`pacplan.worlds.from_gym.steps`): a failure, or an output that is
        not what Gymnasium's API says, is one line naming the environment and the step."""
        try:
            action, _ = checked_action(action, env.action_space)
        except PacplanError as exc:
            raise PacplanError(f"gym world: policy {self.policy!r} {where}: {exc}") from None
        try:
            return checked_step(env, action)
        except PacplanError as exc:
            raise PacplanError(f"gym world: {self.env_id} {where}: {exc}") from None

    def _observed(self, env: Any, o: Any, where: str) -> np.ndarray:
        """An observation, flattened for the policy family; NaN refused."""
        try:
            check_observation(o)
        except PacplanError as exc:
            raise PacplanError(f"gym world: {self.env_id} {where}: {exc}") from None
        return self._flat(env, o)

    @staticmethod
    def _flat(env: Any, o: Any) -> np.ndarray:
        from gymnasium import spaces

        space = env.observation_space
        flat = o if isinstance(space, spaces.Box) else spaces.flatten(space, o)
        return np.asarray(flat, dtype=np.float64).ravel()
