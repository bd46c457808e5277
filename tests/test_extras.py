"""Optional extras: the core install runs without PyBullet, MuJoCo or Ray, and a feature that
needs one names the extra that installs it in one line (`pacplan.extras`).

A missing package is stood in for by a module of its name, first on the path, that records its
import in a file and raises ModuleNotFoundError as an absent package does.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pacplan.errors import PacplanError
from pacplan.extras import EXTRAS, MissingExtraError, install_hint, require

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[1]
ABSENT = ("pybullet", "pybullet_data", "mujoco", "ray")


def test_require_returns_an_installed_module() -> None:
    import json

    assert require("json", "a test") is json


def test_a_missing_module_names_its_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "pybullet.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pybullet'\", name='pybullet')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pybullet", raising=False)
    with pytest.raises(MissingExtraError) as excinfo:
        require("pybullet", "the quadruped world")
    message = str(excinfo.value)
    assert message == ('the quadruped world needs pybullet, which is not installed: '
                       'pip install "pacplan[bullet]"')
    assert isinstance(excinfo.value, PacplanError) and isinstance(excinfo.value, ImportError)


def test_a_broken_install_is_not_called_missing(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed module whose own import fails keeps its error: the extra is installed."""
    (tmp_path / "pacplan_test_broken.py").write_text("import pacplan_test_not_there\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as excinfo:
        require("pacplan_test_broken", "a test")
    assert not isinstance(excinfo.value, MissingExtraError)
    assert excinfo.value.name == "pacplan_test_not_there"


def test_every_extra_named_is_one_pyproject_declares() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(EXTRAS.values()) <= set(declared)
    for module, extra in EXTRAS.items():
        assert install_hint(module) == f'pip install "pacplan[{extra}]"'
    dev = " ".join(declared["dev"])
    assert all(extra in dev for extra in set(declared) - {"dev"}), "dev must hold every extra"


def _without(tmp_path: Path, code: list[str]) -> tuple[subprocess.CompletedProcess[str], str]:
    """Run `code` (an argv after the interpreter) with ABSENT stood in for; the modules it tried."""
    stand_ins = tmp_path / "absent"
    stand_ins.mkdir()
    tried = tmp_path / "tried.txt"
    for name in ABSENT:
        (stand_ins / f"{name}.py").write_text(
            f"with open({str(tried)!r}, 'a') as f:\n    f.write({name!r} + '\\n')\n"
            f"raise ModuleNotFoundError(\"No module named {name!r}\", name={name!r})\n")
    env = {**os.environ, "PYTHONPATH": str(stand_ins), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, *code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    return proc, tried.read_text() if tried.exists() else ""


def test_the_core_worlds_and_cli_import_no_extra(tmp_path: Path) -> None:
    script = ("import numpy as np, pacplan, pacplan.cli\n"
              "from pacplan.worlds.base import make_world\n"
              "toy = make_world('toy')\n"
              "c = toy.costs(np.zeros((2, toy.policy_dim())), np.arange(3))\n"
              "assert c.shape == (3, 2)\n"
              "make_world('uav')\n"
              "import pacplan.worlds.from_gym.world, pacplan.export, pacplan.pipeline.pipeline\n"
              "print('ok')\n")
    proc, tried = _without(tmp_path, ["-c", script])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok" and tried == ""


@pytest.mark.parametrize("world", ["quadruped", "uav -o simulator=bullet"])
def test_a_world_that_needs_pybullet_says_which_extra(tmp_path: Path, world: str) -> None:
    proc, tried = _without(tmp_path, ["-m", "pacplan.cli", "check-world", *world.split(),
                                      "--seeds", "1", "--policies", "1"])
    assert proc.returncode == 2
    assert 'pip install "pacplan[bullet]"' in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "pybullet" in tried
