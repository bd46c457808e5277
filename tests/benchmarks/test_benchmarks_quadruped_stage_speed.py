"""benchmarks/quadruped_stage_speed.py: bad input is refused in one line (exit 2) before any
work, and (slow) a one-terrain run reports every stage, with the teacher's two paths equal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from helpers import assert_refused, run_script

pytest.importorskip("mujoco")

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "quadruped_stage_speed.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_script(SCRIPT, *args, timeout=600)


@pytest.mark.parametrize("args, names", [
    (("--terrains", "0"), "--terrains must be at least 1"),
    (("--epochs", "-1"), "--epochs must be at least 1"),
    (("--first-seed", "200000"), "test seeds"),  # quadruped-paper's test terrains
])
def test_bad_input_is_one_line_and_exit_2(args: tuple[str, ...], names: str) -> None:
    assert_refused(run_script(SCRIPT, *args), names)


@pytest.mark.slow
def test_one_terrain_reports_every_stage() -> None:
    res = _run("--terrains", "1", "--policies", "1", "--epochs", "1")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["certification"]["rollouts"] == 1
    assert out["teacher"]["costs_identical"] is True
    assert out["teacher"]["recording_cpu_s_per_rollout"] > 0
    assert out["distillation"]["labelled_states"] >= 1
    assert out["inside_a_rollout"]["steps"] == 5000
    assert out["solvers"]["newton"]["costs_identical_to_newton"] is True
