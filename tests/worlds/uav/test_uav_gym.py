"""The Gymnasium env passes the official checker and its return is minus the world's cost."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import pacplan  # noqa: F401  (registers the env ids)
from pacplan.errors import PacplanError
from pacplan.worlds.uav import UAVWorld, spec
from pacplan.worlds.uav.policy_np import NumpyPolicy


@pytest.mark.parametrize("simulator", ["batched", "bullet"])
def test_check_env(simulator: str) -> None:
    env = gym.make("pacplan/UAVObstacleField-v0", simulator=simulator)
    check_env(env.unwrapped)
    env.close()


def test_return_is_minus_world_cost() -> None:
    env = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    policy = NumpyPolicy(None)
    world = UAVWorld(use_net=False, compile=False)
    for seed in range(4):
        obs, _ = env.reset(options={"scene_seed": seed})
        assert obs.shape == (spec.IMG, spec.IMG)
        total, done = 0.0, False
        while not done:
            obs, reward, done, _, _ = env.step(policy.choose(obs))
            total += reward
        cost = world.costs(np.zeros((1, spec.POLICY_DIM)), [seed])[0, 0]
        assert -total == pytest.approx(cost)


THETA = np.random.default_rng(3).normal(0, 0.2, spec.POLICY_DIM).astype(np.float32)
SEEDS = np.arange(6)  # with THETA, four of these flights collide and two do not (both sims)


def _episode(env, seed: int, actions) -> tuple[float, int, dict]:
    """Fly `actions` in environment `seed` until the env ends it: (return, steps, last info)."""
    env.reset(options={"scene_seed": int(seed)})
    total, steps, done = 0.0, 0, False
    while not done:
        _, reward, done, truncated, info = env.step(int(actions[steps]))
        assert not truncated
        total, steps = total + reward, steps + 1
    return total, steps, info


@pytest.mark.parametrize("simulator", ["batched", "bullet"])
def test_env_and_world_step_through_the_same_dynamics(simulator: str) -> None:
    """The world's flights, replayed action by action in the Gym env on the same simulator's
    geometry, end at the same step with the same collision time, cost and final position."""
    world = UAVWorld(simulator=simulator, compile=False)
    res = world.rollouts(THETA, SEEDS)
    assert (res.checks > 0).any() and (res.checks == 0).any()  # both endings are exercised
    env = gym.make("pacplan/UAVObstacleField-v0", simulator=simulator).unwrapped
    for i, seed in enumerate(SEEDS):
        seq = res.prims[i, 0]
        total, steps, info = _episode(env, seed, seq)
        assert steps == int((seq >= 0).sum())
        assert info["checks"] == res.checks[i, 0]
        assert -total == res.costs[i, 0]
        np.testing.assert_array_equal(info["position"], world.trajectory(THETA, seed).positions[-1])
    env.close()


def test_bullet_env_closed_loop_is_the_bullet_world() -> None:
    """The bullet world's policy choices are reproduced from the env's own observations."""
    world = UAVWorld(simulator="bullet")
    res = world.rollouts(THETA, SEEDS[:4])
    env = gym.make("pacplan/UAVObstacleField-v0", simulator="bullet").unwrapped
    policy = NumpyPolicy(THETA)
    for i, seed in enumerate(SEEDS[:4]):
        obs, _ = env.reset(options={"scene_seed": int(seed)})
        flown, total, done = [], 0.0, False
        while not done:
            flown.append(policy.choose(obs))
            obs, reward, done, _, _ = env.step(flown[-1])
            total += reward
        assert flown == [int(p) for p in res.prims[i, 0] if p >= 0]
        assert -total == res.costs[i, 0]
    env.close()


def test_env_builds_its_simulator_once_and_ends_episodes() -> None:
    env = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    env.reset(options={"scene_seed": 5})
    sim = env._sim
    _, steps, info = _episode(env, 5, [12] * spec.N_STEPS)  # straight on: hits at check 76
    assert env._sim is sim and info["checks"] == 76 and steps == 4
    with pytest.raises(RuntimeError):
        env.step(12)
    env.reset(options={"scene_seed": 4})
    assert env._sim is sim
    env.close()
    with pytest.raises(PacplanError):
        gym.make("pacplan/UAVObstacleField-v0", simulator="mujoco")


@pytest.mark.parametrize("image_obs", ["float", "uint8"])
def test_check_env_with_frames(image_obs: str) -> None:
    """Both observation layouts, with render_mode="rgb_array", pass Gymnasium's checker."""
    env = gym.make("pacplan/UAVObstacleField-v0", image_obs=image_obs, render_mode="rgb_array")
    check_env(env.unwrapped)
    env.close()


def test_spec_has_the_horizon() -> None:
    """spec.max_episode_steps is the 12-primitive horizon, so gym.make wraps a TimeLimit."""
    env = gym.make("pacplan/UAVObstacleField-v0")
    assert env.spec.max_episode_steps == spec.N_STEPS
    assert isinstance(env, gym.wrappers.TimeLimit)
    env.close()


def test_uint8_observation_is_the_scaled_depth() -> None:
    """image_obs="uint8": (1, 50, 50) uint8, 0..255 over 0..20 m, the same flight otherwise."""
    plain = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    small = gym.make("pacplan/UAVObstacleField-v0", image_obs="uint8").unwrapped
    policy = NumpyPolicy(None)
    depth, _ = plain.reset(options={"scene_seed": 7})
    obs, _ = small.reset(options={"scene_seed": 7})
    done = False
    while not done:
        assert obs.shape == (1, spec.IMG, spec.IMG) and obs.dtype == np.uint8
        np.testing.assert_array_equal(obs[0], np.rint(depth * (255 / spec.FAR)).astype(np.uint8))
        action = policy.choose(depth)
        depth, reward, done, _, _ = plain.step(action)
        obs, reward_u8, done_u8, _, _ = small.step(action)
        assert (reward_u8, done_u8) == (reward, done)
    assert obs.max() > 0 and obs.min() < 255


def test_frames_show_the_flight_and_leave_it_unchanged() -> None:
    """render_mode="rgb_array" gives readable RGB frames that change as the robot flies, and an
    env that draws flies exactly the episode of one that does not. (How long a frame takes is
    no test's business: it asserted under a second, and failed on a busy CPU.)"""
    plain = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    drawn = gym.make("pacplan/UAVObstacleField-v0", render_mode="rgb_array").unwrapped
    with pytest.warns(UserWarning, match="render_mode"):
        assert plain.render() is None  # no render_mode: nothing drawn
    frames = []
    for env in (plain, drawn):
        env.reset(options={"scene_seed": 5})
    first = drawn.render()
    for _ in range(3):
        a, b = plain.step(12), drawn.step(12)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
        frames.append(drawn.render())
    assert first.dtype == np.uint8 and first.ndim == 3 and first.shape[2] == 3
    assert all(f.shape == first.shape for f in frames)
    assert len(np.unique(first.reshape(-1, 3), axis=0)) > 50  # a picture, not a blank
    assert not np.array_equal(frames[0], frames[1])  # the path and the depth moved on
    drawn.close()


def test_env_runs_torch_on_one_thread_and_restores_the_setting() -> None:
    """Inside step torch has one thread (busy CPUs, forked workers); outside, the caller's."""
    import torch

    env = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    seen: list[int] = []
    env.reset(options={"scene_seed": 1})
    sweep = env._sim.sweep

    def spy(position, prim):
        seen.append(torch.get_num_threads())
        return sweep(position, prim)

    env._sim.sweep = spy
    before = torch.get_num_threads()
    env.step(12)
    assert seen == [1] and torch.get_num_threads() == before
    env.close()


@pytest.mark.filterwarnings("ignore:.*ansi.*:UserWarning")
@pytest.mark.parametrize("option", [{"render_mode": "ansi"}, {"image_obs": "uint16"}])
def test_unknown_modes_are_refused(option: dict) -> None:
    with pytest.raises(PacplanError):
        gym.make("pacplan/UAVObstacleField-v0", **option)
