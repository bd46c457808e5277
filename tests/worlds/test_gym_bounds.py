"""return_bounds derived from per-step reward bounds: the range of every episode length
(brute force), Pendulum-v1's bounds from its reward formula, an env's own reward_range, and a
too-narrow bound reported by check_world under the check named for it."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from pacplan.errors import CostRangeError, PacplanError
from pacplan.worlds.check import check_world
from pacplan.worlds.from_gym.bounds import return_bounds_from_rewards
from pacplan.worlds.from_gym.world import GymWorld

# Pendulum-v1's reward is −(θ² + 0.1·θ̇² + 0.001·u²) with |θ| ≤ π, |θ̇| ≤ 8, |u| ≤ 2
# (Gymnasium's documentation of the env): the worst step is −(π² + 6.4 + 0.004).
PENDULUM_WORST_STEP = -(math.pi**2 + 0.1 * 8**2 + 0.001 * 2**2)


@pytest.mark.parametrize(("lo", "hi", "horizon"), [
    (0.0, 1.0, 500), (-16.27, 0.0, 200), (-1.0, 2.5, 7), (0.5, 3.0, 4), (-3.0, -0.5, 4),
    (-2.0, 2.0, 1),
])
def test_derived_bounds_cover_every_episode_length_and_no_more(lo: float, hi: float,
                                                               horizon: int) -> None:
    """Brute force: an episode of L steps (1..H), each reward in [lo, hi], has return in
    [L·lo, L·hi]; the derived bounds are the hull over L, attained at its ends."""
    sums = [(n * lo, n * hi) for n in range(1, horizon + 1)]
    assert return_bounds_from_rewards([lo, hi], horizon) == (min(s[0] for s in sums),
                                                             max(s[1] for s in sums))


def test_bad_reward_bounds_are_named() -> None:
    with pytest.raises(PacplanError, match=r"reward_bounds must be \[r_min, r_max\]"):
        return_bounds_from_rewards([0.0], 10)
    with pytest.raises(PacplanError, match="finite with r_min ≤ r_max"):
        return_bounds_from_rewards([1.0, 0.0], 10)
    with pytest.raises(PacplanError, match="gives one return"):
        return_bounds_from_rewards([2.0, 2.0], 1)
    with pytest.raises(PacplanError, match="give one"):
        GymWorld("Pendulum-v1", return_bounds=[-3300, 0], reward_bounds=[-17, 0])
    with pytest.raises(PacplanError, match=r"declares no finite reward_range.*reward_bounds"):
        GymWorld("Pendulum-v1")


def test_pendulum_bounds_from_its_reward_formula_hold_on_random_policies() -> None:
    world = GymWorld("Pendulum-v1", reward_bounds=[PENDULUM_WORST_STEP, 0.0])
    assert (world.r_min, world.r_max) == (200 * PENDULUM_WORST_STEP, 0.0)
    thetas = np.random.default_rng(0).normal(0, 3.0, (6, world.policy_dim())).astype(np.float32)
    seeds = np.arange(4)
    costs = world.costs(thetas, seeds)
    returns = np.array([world.returns(thetas.astype(np.float64), int(s)) for s in seeds])
    # the cost turns back into the return: R = R_max − c·(R_max − R_min)
    np.testing.assert_allclose(world.r_max - costs * (world.r_max - world.r_min), returns,
                               rtol=0, atol=1e-9)
    assert world.r_min <= returns.min() and returns.max() <= world.r_max
    # the per-step bound is a true bound: no step of these episodes is worse
    env = gym.make("Pendulum-v1")
    env.reset(seed=0)
    worst = min(float(env.step(np.array([2.0], np.float32))[1]) for _ in range(200))
    assert PENDULUM_WORST_STEP <= worst < 0


class _UnitRewardEnv(gym.Env):
    """One observation, reward 1 each step for 10 steps; declares reward_range (0, 1)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    reward_range = (0.0, 1.0)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action: int):
        self.t += 1
        return np.zeros(1, np.float32), float(action), False, self.t >= 10, {}


def test_an_envs_declared_reward_range_gives_the_bounds() -> None:
    gym.register("pacplan-test/UnitReward-v0", entry_point=_UnitRewardEnv, max_episode_steps=10)
    world = GymWorld("pacplan-test/UnitReward-v0", horizon=10)
    assert (world.r_min, world.r_max, world.bounds_from) == (0.0, 10.0, "reward_range")


def test_a_too_narrow_bound_fails_the_check_named_for_it() -> None:
    """Pendulum with a horizon-of-one-step bound: returns leave it; check_world reports the
    failure as in_declared_range (not shape_dtype), and the message says the bounds are too
    narrow and how they were made."""
    options = {"env_id": "Pendulum-v1", "reward_bounds": [-1.0, 0.0]}
    with pytest.raises(CostRangeError):
        GymWorld(**options).costs(np.zeros((1, 4), np.float32), np.array([0]))
    report = check_world("gym", options, seeds=[0, 1], n_policies=2)
    assert [r.name for r in report.failures] == ["in_declared_range"]
    detail = next(r.detail for r in report.results if r.name == "in_declared_range")
    assert "too narrow" in detail and "from reward_bounds over 200 steps" in detail
    status = {r.name: r.status for r in report.results}
    assert status["shape_dtype"] == "skipped" and status["finite"] == "skipped"
    wide = check_world("gym", {"env_id": "Pendulum-v1",
                               "reward_bounds": [PENDULUM_WORST_STEP, 0.0]}, seeds=[0, 1],
                       n_policies=2)
    assert wide.ok and {r.name: r.status for r in wide.results}["in_declared_range"] == "passed"
