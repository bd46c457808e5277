"""benchmarks/quadruped_paper_code_prior.py on two terrains in MuJoCo: one JSON object with the
paired comparison against the paper's prior, and a rerun that computes nothing again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("mujoco")

from helpers import load_script
from pacplan.io.paperdata import paper_data_dir
from pacplan.presets import resolve_prior

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "quadruped_paper_code_prior.py"


def test_the_benchmark_pairs_a_prior_with_the_papers_and_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    if paper_data_dir() is None:
        pytest.skip("the paper's files are not here (`pacplan data paper`)")
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # as when run: it imports its sibling
    bench = load_script(SCRIPT)
    rows = tmp_path / "rows.jsonl"
    args = ["--prior", str(resolve_prior("quadruped-paper-code")), "--terrains", "2",
            "--physics", "mujoco", "--workers", "1", "--rows", str(rows)]
    bench.main(args)
    first = json.loads(capsys.readouterr().out)
    cells = rows.read_text().splitlines()
    assert len(cells) == 1 + 2 * 5  # the stamp, then 5 policies × 2 terrains
    assert set(first["policies"]) == {"prior_draws", "prior_mean", "paper_draws", "paper_mean",
                                      "best_constant_gait"}
    assert "prior_draws_minus_paper_draws" in first["paired"]
    assert first["goal"]["prior_draws_at_most"] == 0.13
    for row in first["policies"].values():
        assert 0.0 <= row["mean_cost"] <= 1.0
    bins = first["by_first_tent"]  # each terrain in one slope bin, each bin's mean its own
    assert sum(b["terrains"] for b in bins.values()) == 2
    for name, row in first["policies"].items():
        weighted = sum(b[name] * b["terrains"] for b in bins.values()) / 2
        assert weighted == pytest.approx(row["mean_cost"], abs=1e-4)
    bench.main(args)  # resumed: nothing walked again, the same figures
    again = json.loads(capsys.readouterr().out)
    assert rows.read_text().splitlines() == cells
    assert again["policies"] == first["policies"]
    bench.main([*args, "--only", "paper_draws"])  # a column alone, from the same rows
    alone = json.loads(capsys.readouterr().out)
    assert alone["policies"] == {"paper_draws": first["policies"]["paper_draws"]}
    # the same prior again as the baseline: its cells are the prior's (keyed by weights), paired 0
    bench.main([*args, "--only", "prior_draws", "baseline_draws", "--baseline-prior",
                str(resolve_prior("quadruped-paper-code"))])
    both = json.loads(capsys.readouterr().out)
    assert rows.read_text().splitlines() == cells
    assert both["paired"]["prior_draws_minus_baseline_draws"]["difference"] == 0.0
    with pytest.raises(SystemExit, match="not a column"):
        bench.main([*args, "--only", "paper"])
    with pytest.raises(SystemExit, match="another world"):
        bench.main([*args[:-4], "--physics", "bullet", "--rows", str(rows)])
