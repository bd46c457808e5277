"""benchmarks/quadruped_result_crossval.py and the report section that quotes it.

Oracle: replayed in its own engine, a MuJoCo run's posterior must reproduce the stored test
matrix entry by entry (paired difference exactly 0), and the report must quote that file only
while its posterior and test matrix are the certificate's."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pacplan.report.document import write_report

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "benchmarks" / "quadruped_result_crossval.py"
RUN = ROOT / "results" / "quadruped-mujoco"


@pytest.fixture
def run_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(RUN, tmp_path / "run",
                                ignore=shutil.ignore_patterns("figures", "report*")))


def test_replay_in_its_own_engine_is_exact_and_reported(run_copy: Path) -> None:
    out = subprocess.run([sys.executable, str(BENCH), str(run_copy), "--engine", "mujoco",
                          "--terrains", "4", "--workers", "1", "--save"],
                         capture_output=True, text=True, check=True, cwd=ROOT)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["run_engine"] == "mujoco" and result["terrains"][1] - result["terrains"][0] == 4
    assert result["paired_diff"] == 0.0
    assert result["replayed_mean_cost"] == result["stored_same_draws_mean_cost"]
    assert json.loads((run_copy / "crossval" / "mujoco.json").read_text()) == result

    text = write_report(run_copy).read_text()
    section = text.split("## The certificate in another engine")[1].split("\n## ")[0]
    assert "replayed in **mujoco** on the first 4 test environments" in section
    assert "+0.00 points" in section and "lies inside it" in section

    saved = run_copy / "crossval" / "mujoco.json"
    for forged, words in (({"test_matrix_sha256": "0" * 64}, "another test matrix"),
                          ({"posterior_sha256": "0" * 64}, "another posterior"),
                          ({"certificate_n": result["certificate_n"] // 2}, "the posterior of N")):
        saved.write_text(json.dumps({**result, **forged}))
        text = write_report(run_copy).read_text()
        assert f"was made from {words}" in text and "**mujoco**" not in text, words
    legacy = {k: v for k, v in result.items() if k != "posterior_sha256"}
    saved.write_text(json.dumps(legacy))  # a file from before posteriors were recorded
    assert "replayed in **mujoco**" in write_report(run_copy).read_text()
    saved.write_text("{not json")
    assert "crossval/mujoco.json` is unreadable" in write_report(run_copy).read_text()
