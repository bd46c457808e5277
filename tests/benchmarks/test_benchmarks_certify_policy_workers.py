"""benchmarks/certify_policy_workers.py on a tiny size: it prints one JSON object whose rates
are N × m over its own measured seconds, and the one- and two-worker matrices are identical
(the speed-up itself is measured on an idle machine, never asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import run_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "certify_policy_workers.py"


@pytest.mark.slow
def test_the_benchmark_measures_both_tasks_with_identical_matrices() -> None:
    pytest.importorskip("mujoco")
    res = run_script(SCRIPT, "--cartpole-n", "12", "--mujoco-n", "4")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    for name, task in out["tasks"].items():
        assert task["matrices_identical"], name
        rollouts = task["n"] * task["policies"]
        secs = {w: task["seconds"][w] for w in ("1", "2")}
        for w in secs:  # seconds are printed to 3 decimals, rates to 1: bound both roundings
            fastest = rollouts / max(secs[w] - 0.0005, 1e-9) + 0.05
            slowest = rollouts / (secs[w] + 0.0005) - 0.05
            assert slowest <= task["rollouts_per_s"][w] <= fastest, (name, w)
        lo = (secs["1"] - 0.0005) / (secs["2"] + 0.0005) - 0.005
        hi = (secs["1"] + 0.0005) / max(secs["2"] - 0.0005, 1e-9) + 0.005
        assert lo <= task["speedup_2_over_1"] <= hi, name
