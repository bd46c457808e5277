"""The Gymnasium envs with the tools their users bring: `gym.make` by id, `RecordVideo`, async
vector envs, and (optional, slow) Stable-Baselines3's PPO through `make_vec_env`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import pacplan  # noqa: F401 - registers the environments

UAV = "pacplan/UAVObstacleField-v0"
QUADRUPED = "pacplan/MinitaurTerrain-v0"


def _run_python(code: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter in its own process group; on timeout the whole group
    (the async workers too) is killed and the test fails instead of hanging."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"timed out after {timeout} s (deadlock?)")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_make_without_importing_pacplan_first() -> None:
    """The "pacplan:" prefix makes Gymnasium import the package that registers the ids."""
    result = _run_python(
        """
        import sys
        import gymnasium as gym
        assert "pacplan" not in sys.modules
        env = gym.make("pacplan:pacplan/UAVObstacleField-v0")
        env.reset(seed=0)
        print(env.spec.id, env.spec.max_episode_steps)
        """,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [UAV, "12"]


def test_async_vector_env_after_the_parent_stepped() -> None:
    """Forked workers of a parent that already ran torch (and PyBullet) step without
    deadlocking: the UAV env keeps torch on one thread inside its steps."""
    result = _run_python(
        """
        import gymnasium as gym
        import numpy as np
        import pacplan

        env = gym.make("pacplan/UAVObstacleField-v0")
        env.reset(seed=0)
        env.step(12)
        envs = gym.make_vec("pacplan/UAVObstacleField-v0", num_envs=2,
                            vectorization_mode="async")
        obs, _ = envs.reset(seed=0)
        for _ in range(6):
            obs, reward, terminated, truncated, _ = envs.step(np.array([12, 7]))
        envs.close()
        print("uav", obs.shape)

        env = gym.make("pacplan/MinitaurTerrain-v0")
        env.reset(seed=0)
        env.step(np.full(4, 0.5, dtype=np.float32))
        envs = gym.make_vec("pacplan/MinitaurTerrain-v0", num_envs=2,
                            vectorization_mode="async")
        obs, _ = envs.reset(seed=0)
        obs, *_ = envs.step(np.full((2, 4), 0.5, dtype=np.float32))
        envs.close()
        print("quadruped", obs["depth"].shape)
        """,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["uav (2, 50, 50)", "quadruped (2, 50, 50)"]


def test_record_video_writes_an_mp4(tmp_path: Path) -> None:
    """`RecordVideo` records an episode of frames from render_mode="rgb_array"."""
    pytest.importorskip("moviepy")
    env = gym.make(UAV, render_mode="rgb_array")
    env = gym.wrappers.RecordVideo(env, str(tmp_path / "videos"), episode_trigger=lambda _: True,
                                   disable_logger=True)
    env.reset(seed=0, options={"scene_seed": 3})
    for action in (12, 13, 12, 11, 12):
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    env.close()  # finishes the video
    videos = list((tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 1000


def _train_ppo(env_id: str, policy: str, steps: int, n_steps: int) -> None:
    """PPO through `make_vec_env` with the uint8 image layout; the policy then acts."""
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env(env_id, n_envs=2, seed=0, env_kwargs={"image_obs": "uint8"})
    model = sb3.PPO(policy, venv, n_steps=n_steps, batch_size=64, n_epochs=2, seed=0,
                    device="cpu")
    model.learn(total_timesteps=steps)
    obs = venv.reset()
    for _ in range(3):
        actions, _ = model.predict(obs, deterministic=True)
        assert all(venv.action_space.contains(a) for a in actions)
        obs, rewards, _, _ = venv.step(actions)
        assert np.isfinite(rewards).all()
    venv.close()


@pytest.mark.slow
def test_ppo_trains_on_the_uav_env_with_cnn_policy() -> None:
    _train_ppo(UAV, "CnnPolicy", steps=2048, n_steps=256)


@pytest.mark.slow
def test_ppo_trains_on_the_quadruped_env_with_multi_input_policy() -> None:
    _train_ppo(QUADRUPED, "MultiInputPolicy", steps=256, n_steps=128)
