"""benchmarks/certify_policy_workers.py on a tiny size: it prints one JSON object whose rates
are N × m over its own measured seconds, and the one- and two-worker matrices are identical
(the speed-up itself is measured on an idle machine, never asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "certify_policy_workers.py"


@pytest.mark.slow
def test_the_benchmark_measures_both_tasks_with_identical_matrices() -> None:
    pytest.importorskip("mujoco")
    res = run_script(SCRIPT, "--cartpole-n", "12", "--mujoco-n", "4")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for name, task in out["tasks"].items():
        assert task["matrices_identical"], name
        rollouts = task["n"] * task["policies"]
        for w in ("1", "2"):
            assert task["rollouts_per_s"][w] == pytest.approx(rollouts / task["seconds"][w],
                                                              rel=0.02, abs=0.06)
        assert task["speedup_2_over_1"] == pytest.approx(
            task["seconds"]["1"] / task["seconds"]["2"], rel=0.02, abs=0.006)
