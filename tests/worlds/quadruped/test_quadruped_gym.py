"""`pacplan/MinitaurTerrain-v0` and `pacplan render quadruped`."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import pacplan  # noqa: F401 - registers the environments
from pacplan.errors import PacplanError
from pacplan.io.weights import load_theta
from pacplan.presets import shipped_priors
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gym_env import MinitaurTerrainEnv
from pacplan.worlds.quadruped.policy import POLICY_DIM, policy_action


@pytest.mark.filterwarnings("ignore:.*Box observation space m.*infinity:UserWarning")
def test_gym_env_passes_check_env() -> None:
    """Proprioception is unbounded on purpose (velocities spike on impacts), hence the filter."""
    env = gym.make("pacplan/MinitaurTerrain-v0")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def _gym_episode(env: MinitaurTerrainEnv, theta: np.ndarray, seed: int) -> dict:
    """Drive the Gym env with the policy's own actions; what the episode produced."""
    obs, info = env.reset(options={"terrain_seed": seed})
    assert info["terrain_seed"] == seed and info["sim_time"] == 0.0
    rewards, gaits, ends = [], [], []
    done = False
    while not done:
        assert env.observation_space.contains(obs)
        obs, reward, terminated, truncated, info = env.step(
            policy_action(theta, obs["depth"], obs["proprio"])
        )
        rewards.append(reward)
        gaits.append(info["gait"])
        ends.append((terminated, truncated))
        done = terminated or truncated
    return {"rewards": rewards, "gaits": gaits, "ends": ends, "info": info}


_PRIOR_MU = shipped_priors()["quadruped"]


@pytest.mark.parametrize(
    ("ending", "options", "policy", "seed"),
    [
        ("truncated", {"horizon_s": 1.5}, "random", 12),
        ("fell", {"horizon_s": 1.5, "max_slope_deg": 35.0}, "wild", 4),
        ("finished", {"finish_dx": 0.5, "horizon_s": 2.0}, "prior", 0),
    ],
)
def test_gym_episode_is_the_world_rollout(
    ending: str, options: dict, policy: str, seed: int
) -> None:
    """Driven by the policy's own actions, the Gym env walks the very episode `QuadrupedWorld`
    certifies: the same gaits, the same end, its final cost is the world's cost bit for bit and
    its return is 1 − that cost. One case for each way an episode ends."""
    theta = (
        np.random.default_rng(3).normal(0, {"random": 0.2, "wild": 1.0}[policy], POLICY_DIM)
        .astype(np.float32)
        if policy in ("random", "wild")
        else load_theta(_PRIOR_MU, POLICY_DIM, "quadruped")
    )
    world = QuadrupedWorld(**options)
    world_cost = world.costs(theta[None], np.array([seed]))[0, 0]
    walked = world.rollout(theta, seed)
    env = MinitaurTerrainEnv(**options)
    ep = _gym_episode(env, theta, seed)
    env.close()

    info = ep["info"]
    assert info["cost"] == world_cost == walked.cost  # the same simulation, bit for bit
    assert float(np.clip(1.0 - sum(ep["rewards"]), 0, 1)) == pytest.approx(world_cost, abs=1e-12)
    assert ep["gaits"] == walked.gaits
    assert info["sim_time"] == walked.sim_time
    assert (info["fell"], info["finished"]) == (walked.fell, walked.finished)
    assert ep["ends"][:-1] == [(False, False)] * (len(ep["ends"]) - 1)
    assert ep["ends"][-1] == ((False, True) if ending == "truncated" else (True, False))
    # a real outcome: the walk ended the way this case is about, with a cost inside (0, 1)
    # unless it crossed the finish line
    expected_end = {"truncated": (False, False), "fell": (True, False), "finished": (False, True)}
    assert (walked.fell, walked.finished) == expected_end[ending]
    if ending == "finished":
        assert world_cost == 0.0
    else:
        assert 0.0 < world_cost < 1.0


def test_step_before_reset_is_refused() -> None:
    env = MinitaurTerrainEnv()
    with pytest.raises(gym.error.ResetNeeded):
        env.step(np.full(4, 0.5, dtype=np.float32))
    env.close()


def test_load_theta_formats(tmp_path: Path) -> None:
    """The files `pacplan render quadruped --theta` reads, through `pacplan.io.weights`."""
    from safetensors.numpy import save_file

    def load(name: str) -> np.ndarray:
        return load_theta(tmp_path / name, POLICY_DIM, "quadruped")

    theta = np.arange(POLICY_DIM, dtype=np.float32)
    np.save(tmp_path / "t.npy", theta[None])
    np.testing.assert_array_equal(load("t.npy"), theta)
    save_file({"mu": theta, "log_var": theta}, str(tmp_path / "p.safetensors"))
    np.testing.assert_array_equal(load("p.safetensors"), theta)
    np.save(tmp_path / "bad.npy", np.zeros(5))
    with pytest.raises(PacplanError):
        load("bad.npy")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(PacplanError):
        load("obj.npy")


@pytest.mark.slow
def test_render_cli_writes_png(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from pacplan.cli import app

    out = tmp_path / "fig.png"
    result = CliRunner().invoke(app, ["render", "quadruped", "--seed", "3", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.exists() and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    import matplotlib.image as mpimg

    img = mpimg.imread(out)
    assert img.shape[0] > 300 and img.shape[1] > 1000


@pytest.mark.filterwarnings("ignore:.*Box observation space m.*infinity:UserWarning")
@pytest.mark.parametrize("image_obs", ["float", "uint8"])
def test_check_env_with_frames(image_obs: str) -> None:
    """Both observation layouts, with render_mode="rgb_array", pass Gymnasium's checker."""
    env = gym.make("pacplan/MinitaurTerrain-v0", image_obs=image_obs, render_mode="rgb_array")
    check_env(env.unwrapped)
    env.close()


def test_spec_has_the_horizon() -> None:
    """spec.max_episode_steps is the default 20-primitive horizon, so a TimeLimit wraps."""
    env = gym.make("pacplan/MinitaurTerrain-v0")
    assert env.spec.max_episode_steps == QuadrupedWorld().rollout_config.max_primitives == 20
    assert isinstance(env, gym.wrappers.TimeLimit)
    env.close()


def test_uint8_frames_and_float_walk_the_same_episode() -> None:
    """image_obs="uint8" is the scaled depth, (1, 50, 50) uint8 over 0..far; drawing frames
    (which records the torso path) changes nothing in the walk; frames are RGB and move on."""
    options = {"horizon_s": 1.5}
    plain = MinitaurTerrainEnv(**options)
    drawn = MinitaurTerrainEnv(render_mode="rgb_array", image_obs="uint8", **options)
    far = plain.world.camera.far_m
    a, _ = plain.reset(options={"terrain_seed": 4})
    b, _ = drawn.reset(options={"terrain_seed": 4})
    frames = [drawn.render()]
    done = False
    while not done:
        assert b["depth"].shape == (1, 50, 50) and b["depth"].dtype == np.uint8
        expected = np.rint(np.clip(a["depth"], 0, far) * (255 / far)).astype(np.uint8)
        np.testing.assert_array_equal(b["depth"][0], expected)
        np.testing.assert_array_equal(b["proprio"], a["proprio"])
        action = np.array([0.5, 0.5, 0.5, 0.0], dtype=np.float32)
        a, ra, ta, ua, ia = plain.step(action)
        b, rb, tb, ub, ib = drawn.step(action)
        assert (ra, ta, ua, ia["cost"]) == (rb, tb, ub, ib["cost"])
        frames.append(drawn.render())
        done = ta or ua
    plain.close()
    drawn.close()
    assert all(f.dtype == np.uint8 and f.ndim == 3 and f.shape[2] == 3 for f in frames)
    assert len(np.unique(frames[-1].reshape(-1, 3), axis=0)) > 50  # a picture, not a blank
    assert not np.array_equal(frames[0], frames[-1])
