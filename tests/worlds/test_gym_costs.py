"""Costs the user defines in the `gym` world: a named success key (optionally requiring
termination) and a `module:function` of the episode record, each checked against a hand-run
episode of the raw environment; every bad cost is one error naming the seed and the function."""

from __future__ import annotations

import pickle

import gymnasium as gym
import numpy as np
import pytest

import user_costs
from pacplan.errors import CostRangeError, PacplanError
from pacplan.worlds.base import make_world
from pacplan.worlds.check import check_world
from pacplan.worlds.from_gym.world import GymWorld

# Linear policies on the lander's 2 observations: d = 2·2 + 2; the bias decides the action.
HOVER = np.array([[0, 0, 0, 0, 1, 0]], np.float32)  # always action 0
FIRE = np.array([[0, 0, 0, 0, 0, 1]], np.float32)  # always action 1: fires at step 0
SEEDS = np.arange(12)


@pytest.fixture(scope="module")
def lander() -> str:
    return user_costs.register_lander()


def _window(env_id: str, seed: int) -> int:
    """The raw environment's landing step for `seed` (the oracle)."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    return int(env.unwrapped.window)


def test_success_key_names_the_info_entry(lander: str) -> None:
    world = GymWorld(lander, cost="success", success_key="landed")
    fire = world.costs(FIRE, SEEDS)[:, 0]
    expected = [0.0 if _window(lander, int(s)) == 0 else 1.0 for s in SEEDS]
    assert fire.tolist() == expected and set(expected) == {0.0, 1.0}
    assert world.costs(HOVER, SEEDS).min() == 1.0  # never lands
    # the default key is is_success, which this environment never sets: refused, not a 100 %
    with pytest.raises(PacplanError, match=r"seed 0: the last step's info has no 'is_success' "
                       r"entry \(its keys: 'landed', 'hovering'\)"):
        GymWorld(lander, cost="success").costs(FIRE, SEEDS)


def test_success_needs_terminated_refuses_a_time_limit(lander: str) -> None:
    """Hovering ends with info hovering True but truncated, not terminated."""
    loose = GymWorld(lander, cost="success", success_key="hovering")
    strict = GymWorld(lander, cost="success", success_key="hovering",
                      success_needs_terminated=True)
    assert loose.costs(HOVER, SEEDS).max() == 0.0
    assert strict.costs(HOVER, SEEDS).min() == 1.0
    landed = GymWorld(lander, cost="success", success_key="landed",
                      success_needs_terminated=True)
    assert np.array_equal(landed.costs(FIRE, SEEDS),
                          GymWorld(lander, cost="success", success_key="landed")
                          .costs(FIRE, SEEDS))


def test_a_cost_function_sees_the_episode_record(lander: str) -> None:
    user_costs.SEEN.clear()
    world = GymWorld(lander, cost="user_costs:short_is_bad")
    costs = world.costs(np.concatenate([HOVER, FIRE]), np.array([5, 6]))
    assert costs.tolist() == [[0.0, 0.9], [0.0, 0.9]]  # 1 − length/10: 10 and 1 steps
    hover, fire = user_costs.SEEN[0], user_costs.SEEN[1]
    assert (hover.seed, hover.length, hover.total_return, hover.last_reward) == (5, 10, -10.0,
                                                                               -1.0)
    assert hover.truncated and not hover.terminated and hover.info["hovering"]
    landed = _window(lander, 5) == 0
    assert fire.terminated and not fire.truncated and fire.length == 1
    assert fire.info["landed"] == landed
    assert fire.total_return == fire.last_reward == (10.0 if landed else -1.0)


def test_a_bool_is_a_cost_and_the_function_travels_by_name(lander: str) -> None:
    world = GymWorld(lander, cost="user_costs:not_landed")
    want = GymWorld(lander, cost="success", success_key="landed").costs(FIRE, SEEDS)
    assert np.array_equal(world.costs(FIRE, SEEDS), want)
    again = pickle.loads(pickle.dumps(world))
    assert np.array_equal(again.costs(FIRE, SEEDS), want)


@pytest.mark.parametrize(("target", "error", "pattern"), [
    ("user_costs:too_big", CostRangeError,
     r"^cost function user_costs:too_big returned 1\.5 on seed 3, outside \[0, 1\]"),
    ("user_costs:nan_cost", CostRangeError, r"returned nan on seed 0, outside \[0, 1\]"),
    ("user_costs:words", PacplanError, r"returned 'bad' \(str\) on seed 0: a cost is a number"),
    ("user_costs:raises", PacplanError,
     r"^cost function user_costs:raises raised KeyError: 'altitude' on seed 0$"),
])
def test_a_bad_cost_names_the_seed_and_the_function(lander: str, target: str,
                                                     error: type, pattern: str) -> None:
    world = GymWorld(lander, cost=target)
    with pytest.raises(error, match=pattern) as info:
        world.costs(HOVER, SEEDS)
    assert "\n" not in str(info.value)


def test_check_world_names_an_out_of_range_cost_function(lander: str) -> None:
    report = check_world("gym", {"env_id": lander, "cost": "user_costs:too_big"},
                         seeds=range(5), timeout_s=None)
    failed = {r.name: r.detail for r in report.results if r.status == "failed"}
    assert "seed 3" in failed["in_declared_range"]


@pytest.mark.parametrize(("options", "pattern"), [
    ({"cost": "user_costs:NOT_CALLABLE"}, "user_costs:NOT_CALLABLE' is not callable"),
    ({"cost": "user_costs:nothing"}, "cost function 'user_costs:nothing' is not available"),
    ({"cost": "no_such_module_xyz:f"}, "no_such_module_xyz"),
    ({"cost": "landed"}, "cost"),
    ({"cost": "return", "return_bounds": [-10, 10], "success_key": "landed"},
     "applies only to cost 'success'"),
    ({"cost": "success", "success_key": ""}, "success_key must be a non-empty string"),
    ({"cost": "success", "success_key": 3}, "option 'success_key' must be"),
    ({"cost": "success", "success_needs_terminated": "yes"},
     "option 'success_needs_terminated' must be"),
])
def test_bad_cost_options_are_named_before_any_rollout(lander: str, options: dict,
                                                       pattern: str) -> None:
    with pytest.raises(PacplanError, match=pattern):
        make_world("gym", env_id=lander, **options)
