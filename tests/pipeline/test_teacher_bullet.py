"""The quadruped's teacher where it cannot look ahead: another robot than the Derpy (its
candidates and scores were made on it). Every way a config asks for it (a distill section,
`planner: teacher` for the run's world or a baseline's) is refused in one line by `run` and
`train-prior` before any work, leaving no run folder; a baseline asking for it was once refused
only when it was flown, after both cost matrices. (The teacher itself runs in both engines:
tests/worlds/quadruped/test_quadruped_teacher_paper_code.py replays it bit for bit in PyBullet.)"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from helpers import cli

BULLET = {"robot": "minitaur", "horizon_s": 1.0}  # physics left out: "bullet", the default
BASE = {
    "name": "bullet-teacher",
    "world": {"name": "quadruped", "options": BULLET},
    "seeds": {"prior": [0, 1000], "prior_eval": [300_000, 300_010], "cert": [100_000, 100_004],
              "test": [200_000, 200_004]},
    "es": {"iterations": 1, "envs_per_iter": 1, "pairs_per_env": 1, "init_var": 0.001},
    "executor": {"kind": "serial", "chunk_policies": 1, "chunk_seeds": 4},
    "policies": {"m": 1},
    "report": {"trajectories": 0},
}
REFUSED = "the quadruped teacher's gaits and scores are made for robot 'derpy', not 'minitaur'"


@pytest.mark.parametrize(("changes", "prefix"), [
    ({"distill": {"envs": 2, "rounds": 0, "eval_envs": 2, "workers": 1}}, ""),
    ({"distill": {"envs": 2, "rounds": 0, "eval_envs": 0, "workers": 1},
      "world": {"name": "quadruped", "options": BULLET | {"physics": "bullet"}}}, ""),
    ({"world": {"name": "quadruped", "options": BULLET | {"planner": "teacher"}}}, ""),
    ({"baselines": [{"name": "teacher", "world_options": {"planner": "teacher"}}]},
     "baseline 'teacher': "),
], ids=["distill", "distill-explicit-bullet", "world-planner", "baseline-planner"])
def test_the_teacher_for_another_robot_is_refused_before_any_work(
        tmp_path: Path, changes: dict, prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bullet.yaml"
    config.write_text(yaml.safe_dump(BASE | changes))
    for command in ("train-prior", "run"):
        out = tmp_path / command
        code, stdout, err = cli([command, str(config), "--out", str(out), "--quiet"], capsys)
        assert code == 2 and err.strip() == f"error: {prefix}{REFUSED}", err
        assert "Traceback" not in err and stdout == ""
        assert not out.exists()


def test_a_baseline_option_bullet_refuses_is_named_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Any option the quadruped refuses on Bullet is named when the run starts, not when its
    baseline is flown (`threads` > 1: PyBullet holds the GIL)."""
    config = tmp_path / "bullet.yaml"
    config.write_text(yaml.safe_dump(BASE | {"baselines": [
        {"name": "threaded", "world_options": {"threads": 2}}]}))
    out = tmp_path / "run"
    code, _, err = cli(["run", str(config), "--out", str(out), "--quiet"], capsys)
    assert code == 2 and err.startswith("error: baseline 'threaded': threads > 1 needs "
                                        "physics='mujoco'"), err
    assert len(err.strip().splitlines()) == 1 and not out.exists()
