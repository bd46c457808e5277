"""User code is found by one rule in every command: the working folder, searched after the
installed libraries, and said on stderr. `export` and `verify PLANNER` find the env module
`certify-policy` found, with no PYTHONPATH; and a module that merely sits beside someone else's
planner is never imported (the planner's folder is not the working folder).

The console script runs in a subprocess, as a user runs it: its `sys.path` has no working
folder of its own, which is what the rule is about."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import onnx_linear

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

ENV_MODULE = textwrap.dedent("""\
    import gymnasium as gym
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv


    class Grid(CartPoleEnv):
        def __init__(self, size=5, **kwargs):
            super().__init__(**kwargs)
            self.size = size


    gym.register("Grid-v0", entry_point=Grid, max_episode_steps=30)
    """)


def _pacplan(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("pacplan")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A user's folder: their env module, an ONNX policy, a certificate and its planner."""
    pytest.importorskip("onnx")
    folder = tmp_path_factory.mktemp("project")
    (folder / "mygrid.py").write_text(ENV_MODULE)
    onnx_linear(folder / "policy.onnx", 4, 2)
    made = _pacplan(["certify-policy", "mygrid:Grid-v0", "policy.onnx", "--env-kwargs",
                     "size=6", "--return-bounds", "0,30", "--n", "20", "--out", "runs/grid",
                     "--quiet"], folder)
    assert made.returncode == 0, made.stderr
    return folder


def test_export_and_verify_find_the_env_module_in_the_working_folder(project: Path) -> None:
    exported = _pacplan(["export", "runs/grid", "--out", "planners/grid"], project)
    assert exported.returncode == 0, exported.stderr
    assert "user code imported from the working folder: mygrid.py" in exported.stderr
    checked = _pacplan(["verify", "planners/grid"], project)
    assert checked.returncode == 0, checked.stderr
    assert "OK" in checked.stdout and "mygrid.py" in checked.stderr
    # the rest of the chain from the same folder, with no environment variable
    (project / "costs.csv").write_text("0.2\n" * 30)
    for watched in ("planners/grid", "runs/grid"):
        watching = _pacplan(["monitor", watched, "costs.csv"], project)
        assert watching.returncode == 0 and "holding" in watching.stdout, watching.stderr
    reported = _pacplan(["report", "runs/grid"], project)
    assert reported.returncode == 0 and (project / "runs/grid/report.md").is_file()
    acting = subprocess.run(
        [sys.executable, "-c", "from pacplan_runtime import Planner; import numpy as np; "
         "p = Planner.load('planners/grid'); ep = p.episode(np.random.default_rng(0)); "
         "print(p.horizon, int(ep.act(np.zeros(4, np.float32)).action))"],
        cwd=project, capture_output=True, text=True, timeout=120)
    assert acting.returncode == 0 and acting.stdout.split()[0] == "30", acting.stderr


def test_code_beside_someone_elses_planner_is_never_run(project: Path, tmp_path: Path) -> None:
    """A planner received with a `mygrid.py` beside it, checked from another folder: that
    module is not imported (it would leave a mark), and verify says what it could not find."""
    received = tmp_path / "downloads" / "grid"
    received.parent.mkdir()
    done = _pacplan(["export", "runs/grid", "--out", str(received)], project)
    assert done.returncode == 0, done.stderr
    mark = tmp_path / "ran"
    beside = f"open({str(mark)!r}, 'w').write('ran')\n" + ENV_MODULE
    (received.parent / "mygrid.py").write_text(beside)  # inside, the manifest would refuse it
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    checked = _pacplan(["verify", str(received)], elsewhere)
    assert not mark.exists()
    assert checked.returncode == 2
    assert "no module named 'mygrid'" in checked.stderr, checked.stderr
    assert len(checked.stderr.strip().splitlines()) == 1, checked.stderr
