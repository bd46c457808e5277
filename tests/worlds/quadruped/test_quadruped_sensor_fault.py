"""A sensor fault (an observation that is not finite) ends a rollout with cost 1, in both
variants, in a world's cost matrix and in the Gymnasium environment, and the policy never sees
it. The faults are injected into a real simulator's readings after k observations, so every
rollout here is a real walk up to the fault."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import pacplan.worlds  # noqa: F401  (registers the Gymnasium environments)
from pacplan.errors import SensorFaultWarning
from pacplan.worlds import make_world
from pacplan.worlds.quadruped import episode
from pacplan.worlds.quadruped.episode import EpisodeState, RolloutConfig
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT, GaitParams
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import Controller

SHORT = {"physics": "mujoco", "horizon_s": 2.0}  # four 0.5 s primitives (text world)
SHORT_CODE = {"variant": "paper-code", "horizon_s": 1.0}  # four 0.25 s primitives (MuJoCo)


def inject_fault(sim: object, monkeypatch: pytest.MonkeyPatch, after: int,
                 reading: str = "depth_image") -> None:
    """From its `after`-th call on, `sim.<reading>()` returns its reading with one NaN."""
    real = getattr(sim, reading)
    calls = {"n": 0}

    def faulty() -> np.ndarray:
        out = np.array(real(), dtype=np.float64 if reading == "proprioception" else None)
        calls["n"] += 1
        if calls["n"] > after:
            out.flat[out.size // 2] = np.nan
        return out

    monkeypatch.setattr(sim, reading, faulty)


def finite_controller(seen: list[np.ndarray]) -> Controller:
    """A controller that records what it sees and fails on anything not finite."""

    def control(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
        assert np.isfinite(depth).all() and np.isfinite(proprio).all()
        seen.append(depth)
        return REFERENCE_GAIT

    return control


@pytest.mark.parametrize("options", [SHORT, SHORT_CODE], ids=["text", "paper-code"])
@pytest.mark.parametrize("reading", ["depth_image", "proprioception"])
def test_a_fault_ends_the_rollout_with_cost_one_before_the_policy_sees_it(
        options: dict, reading: str, monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world("quadruped", **options)
    clean = world.run(finite_controller([]), 3)
    assert not clean.sensor_fault and clean.primitives == 4 and clean.cost < 1.0
    inject_fault(world.sim, monkeypatch, after=2, reading=reading)
    seen: list[np.ndarray] = []
    with pytest.warns(SensorFaultWarning, match="terrain 3: an observation was not finite "
                                                "after 2 primitives"):
        faulted = world.run(finite_controller(seen), 3)
    assert faulted.sensor_fault and faulted.cost == 1.0 and faulted.primitives == 2
    assert len(seen) == 2 and not faulted.fell and not faulted.finished
    # the walk up to the fault is the clean walk's
    assert faulted.gaits == clean.gaits[:2]


def test_a_fault_in_a_cost_matrix_is_a_cost_of_one_the_rest_unchanged(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = make_world("quadruped", **SHORT_CODE)
    thetas = np.random.default_rng(0).normal(0.0, 0.1, (2, POLICY_DIM))
    seeds = np.array([5, 6])
    clean = world.costs(thetas, seeds)
    assert np.all(clean < 1.0)
    # one faulty reading: the third rollout's first observation (rollouts run terrain by
    # terrain; each observes once before each of its primitives)
    before = sum(world.rollout(thetas[j], 5).primitives for j in range(2))
    real = world.sim.depth_image
    calls = {"n": 0}

    def faulty() -> np.ndarray:
        calls["n"] += 1
        out = np.array(real())
        if calls["n"] == before + 1:
            out[0, 0] = np.nan
        return out

    monkeypatch.setattr(world.sim, "depth_image", faulty)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        costs = world.costs(thetas, seeds)
    assert [type(w.message) for w in caught] == [SensorFaultWarning]
    expected = clean.copy()
    expected[1, 0] = 1.0
    np.testing.assert_array_equal(costs, expected)


def test_episode_rules_of_a_fault() -> None:
    cfg = RolloutConfig(finish_dx=6.0, horizon_s=1.5, primitive_s=0.5)
    walked = EpisodeState(x0=0.0, x=2.4, primitives=1)
    ended = episode.faulted(walked)
    assert episode.terminated(ended) and episode.done(ended, cfg)
    assert not episode.truncated(ended, cfg)
    assert episode.cost(ended, cfg) == 1.0 and episode.cost(walked, cfg) == pytest.approx(0.6)
    # the return stays 1 − cost: the fault's reward takes back the progress made
    start = EpisodeState(x0=0.0, x=0.0)
    total = episode.reward(start, walked, cfg) + episode.reward(walked, ended, cfg)
    assert total == pytest.approx(1.0 - episode.cost(ended, cfg))
    assert episode.reward(ended, ended, cfg) == 0.0
    finite = {"depth": np.ones((2, 2), np.float32), "proprio": np.zeros(3, np.float32)}
    assert not episode.sensor_fault(finite)
    for key, bad in (("depth", np.inf), ("proprio", np.nan)):
        broken = {k: v.copy() for k, v in finite.items()}
        broken[key].flat[0] = bad
        assert episode.sensor_fault(broken)


def test_the_gym_episode_ends_as_the_certified_rollout_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    env = gym.make("pacplan/MinitaurTerrain-v0", **SHORT).unwrapped
    obs, info = env.reset(options={"terrain_seed": 3})
    assert not info["sensor_fault"]
    inject_fault(env.world.sim, monkeypatch, after=1)  # the second step's observation
    action = np.full(4, 0.5, dtype=np.float32)
    total, steps = 0.0, 0
    terminated = False
    while not terminated:
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        steps += 1
        assert not truncated and env.observation_space.contains(obs)
    assert steps == 2 and info["sensor_fault"] and info["cost"] == 1.0
    assert total == pytest.approx(0.0)  # the return is 1 − cost
    env.close()
