"""`pacplan/MinitaurTerrain-v0` and `pacplan render quadruped`."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import pacplan  # noqa: F401 - registers the environments
from pacplan.errors import PacplanError
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gym_env import MinitaurTerrainEnv
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.render import load_theta


@pytest.mark.filterwarnings("ignore:.*Box observation space m.*infinity:UserWarning")
def test_gym_env_passes_check_env() -> None:
    """Proprioception is unbounded on purpose (velocities spike on impacts), hence the filter."""
    env = gym.make("pacplan/MinitaurTerrain-v0")
    check_env(env.unwrapped, skip_render_check=True)
    env.close()


def test_gym_episode_matches_world_cost() -> None:
    """Feeding the policy's own outputs as actions reproduces `QuadrupedWorld`'s cost."""
    from pacplan.worlds.quadruped.policy import policy_output

    opts = {"horizon_s": 1.5}
    env = MinitaurTerrainEnv(**opts)
    theta = np.random.default_rng(3).normal(0, 0.2, POLICY_DIM).astype(np.float32)
    obs, info = env.reset(options={"terrain_seed": 12})
    assert info["terrain_seed"] == 12
    assert env.observation_space.contains(obs)
    total, steps, done = 0.0, 0, False
    while not done:
        eta = policy_output(theta, obs["depth"], obs["proprio"]).astype(np.float32)
        obs, reward, terminated, truncated, info = env.step(eta)
        total += reward
        steps += 1
        done = terminated or truncated
    assert steps <= 3
    world_cost = QuadrupedWorld(**opts).costs(theta[None], np.array([12]))[0, 0]
    assert info["cost"] == world_cost  # the same simulation, bit for bit
    assert float(np.clip(1.0 - total, 0, 1)) == pytest.approx(world_cost, abs=1e-6)
    env.close()


def test_load_theta_formats(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    theta = np.arange(POLICY_DIM, dtype=np.float32)
    np.save(tmp_path / "t.npy", theta[None])
    np.testing.assert_array_equal(load_theta(str(tmp_path / "t.npy")), theta)
    save_file({"mu": theta, "log_var": theta}, str(tmp_path / "p.safetensors"))
    np.testing.assert_array_equal(load_theta(str(tmp_path / "p.safetensors")), theta)
    np.save(tmp_path / "bad.npy", np.zeros(5))
    with pytest.raises(PacplanError):
        load_theta(str(tmp_path / "bad.npy"))
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(PacplanError):
        load_theta(str(tmp_path / "obj.npy"))


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
