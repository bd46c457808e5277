"""The shared episode step: end rules, reward and cost on explicit states, and one transition."""

from __future__ import annotations

import itertools

import numpy as np
import pybullet
import pytest

from pacplan.worlds.quadruped import episode
from pacplan.worlds.quadruped.episode import EpisodeState, RolloutConfig
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT
from pacplan.worlds.quadruped.sim import MinitaurSim
from pacplan.worlds.quadruped.terrain import sample_terrain

CFG = RolloutConfig(finish_dx=6.0, horizon_s=1.5, primitive_s=0.5)


def test_end_rules() -> None:
    """A fall or the finish line terminates; the horizon truncates only an episode still going."""
    running = EpisodeState(x0=0.0, x=1.0, primitives=2)
    assert CFG.max_primitives == 3
    assert not episode.done(running, CFG)
    at_horizon = EpisodeState(x0=0.0, x=1.0, primitives=3)
    assert episode.truncated(at_horizon, CFG) and not episode.terminated(at_horizon)
    for end in (
        EpisodeState(x0=0.0, x=1.0, primitives=3, fell=True),
        EpisodeState(x0=0.0, x=6.0, primitives=1, finished=True),
    ):
        assert episode.terminated(end) and not episode.truncated(end, CFG)
        assert episode.done(end, CFG)


def test_rewards_sum_to_one_minus_cost_before_clipping() -> None:
    xs = [0.2, 1.4, 0.9, 3.2]
    states = [EpisodeState(x0=xs[0], x=x, primitives=i) for i, x in enumerate(xs)]
    total = sum(episode.reward(a, b, CFG) for a, b in itertools.pairwise(states))
    assert total == pytest.approx(1.0 - episode.cost(states[-1], CFG))
    assert episode.cost(EpisodeState(x0=1.0, x=0.5), CFG) == 1.0  # backwards: clipped
    assert episode.cost(EpisodeState(x0=1.0, x=8.0), CFG) == 0.0  # past the finish: clipped


def test_transition_walks_and_detects_a_fall() -> None:
    sim = MinitaurSim()
    try:
        start = episode.initial(sim, sample_terrain(0, 0.0))
        assert start == EpisodeState(x0=start.x, x=start.x) and sim.time == 0.0
        obs = episode.observation(sim)
        assert obs["depth"].shape == (50, 50) and obs["depth"].dtype == np.float32
        assert obs["proprio"].shape == (22,) and obs["proprio"].dtype == np.float32
        blind = episode.observation(sim, depth=False)["depth"]
        assert np.all(blind == sim.camera.far_m)

        walked, outcome = episode.transition(sim, start, REFERENCE_GAIT, CFG)
        assert walked.primitives == 1 and outcome.steps == 250 and not episode.done(walked, CFG)
        assert walked.x == sim.torso_x() and walked.x0 == start.x0
        assert walked.x > start.x  # the trot moves forward on flat ground

        pybullet.resetBasePositionAndOrientation(
            sim.robot, [0.0, 0.0, 0.3], pybullet.getQuaternionFromEuler([1.6, 0.0, 0.0]),
            physicsClientId=sim.cid,
        )
        fallen, outcome = episode.transition(sim, walked, REFERENCE_GAIT, CFG)
        assert fallen.fell and outcome.steps == sim.physics.check_every
        assert episode.terminated(fallen) and fallen.primitives == 2
    finally:
        sim.close()
