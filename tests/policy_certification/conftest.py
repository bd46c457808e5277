"""A tiny Stable-Baselines3 PPO policy trained on CartPole for a few seconds (once per session),
and SB3's own model of it: SB3 is the oracle for pacplan's pickle-free reader."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def ppo_cartpole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """(path of the saved .zip, the SB3 model) of a PPO trained for 512 steps."""
    sb3 = pytest.importorskip("stable_baselines3")
    import torch

    model = sb3.PPO("MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, n_epochs=2,
                    seed=0, device="cpu",
                    policy_kwargs={"net_arch": [16], "activation_fn": torch.nn.ReLU})
    model.learn(512)
    path = tmp_path_factory.mktemp("sb3") / "ppo-cartpole.zip"
    model.save(path)
    return path, model
