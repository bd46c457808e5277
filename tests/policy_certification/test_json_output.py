"""Under `--json`, stdout is the one JSON object: an environment module or a policy that prints
(at import, at every step, from Python or straight to file descriptor 1, in this process or a
worker's) writes to stderr instead. Before, their text went into the JSON on stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

NOISY_ENV = """\
import os
import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

print("noisy env imported")


class Noisy(CartPoleEnv):
    def step(self, action):
        print("env step")
        os.write(1, b"env step at fd 1\\n")
        return super().step(action)


gym.register("Noisy-v0", entry_point=Noisy, max_episode_steps=20)
"""

NOISY_POLICY = """\
import sys

print("policy module imported")


def act(obs):
    sys.stdout.write("policy acts\\n")
    return int(obs[2] > 0)
"""


@pytest.mark.parametrize("workers", [1, 2])
def test_user_code_that_prints_leaves_the_json_alone(tmp_path: Path, workers: int) -> None:
    (tmp_path / "noisy_env.py").write_text(textwrap.dedent(NOISY_ENV))
    (tmp_path / "noisy_policy.py").write_text(textwrap.dedent(NOISY_POLICY))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-m", "pacplan", "certify-policy", "noisy_env:Noisy-v0",
         "noisy_policy:act", "--n", "6", "--cost", "terminated", "--workers", str(workers),
         "--json", "--out", str(tmp_path / "out")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    record = json.loads(done.stdout)  # nothing but the certificate
    assert record["n"] == 6 and record["m"] == 1
    for text in ("noisy env imported", "env step at fd 1", "policy acts"):
        assert text in done.stderr
