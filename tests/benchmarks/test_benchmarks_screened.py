"""benchmarks/screened_certificates.py: what screening costs a certificate, measured against the
unscreened one on the same matrix. Oracle: the shipped `results/quadruped` matrices, screened
and certified here with the engine's own two solvers and plain numpy rollout counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from helpers import load_script
from pacplan.pacbayes.posterior import optimize_gibbs, optimize_gibbs_columns
from pacplan.pipeline.stages import screen_columns

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "screened_certificates.py"
RUN = ROOT / "results" / "quadruped" / "costs"


def test_each_row_is_the_screened_and_the_plain_certificate_of_the_same_matrix() -> None:
    cert = np.load(RUN / "cert.npy", allow_pickle=False)
    test = np.load(RUN / "test.npy", allow_pickle=False)
    rows = load_script(SCRIPT).measure(cert, test, 1000, [15])
    assert [r["n"] for r in rows] == [1000, 2000, 4000]
    for r in rows:
        n = r["n"]
        kept = screen_columns(cert[:1000], 15)
        screened = optimize_gibbs_columns(cert[:n, kept], 50, 0.01, "best")
        plain = optimize_gibbs(cert[:n], 0.01, "best")
        assert r["certified"] == round(screened.value, 6) >= r["unscreened_certified"]
        assert r["unscreened_certified"] == round(plain.value, 6)
        assert r["rollouts"] == 1000 * 50 + (n - 1000) * 15 + 1000 * 15
        assert r["unscreened_rollouts"] == (n + 1000) * 50
        assert r["test_cost"] == round(float((test[:, kept] @ screened.p).mean()), 6)


def test_the_shipped_figures_are_what_the_script_prints() -> None:
    """benchmarks/data/screened-certificates.json: its results/quadruped rows recompute."""
    data = json.loads((ROOT / "benchmarks" / "data" / "screened-certificates.json").read_text())
    shipped = data["matrices"]["results/quadruped (text world, MuJoCo)"]["rows"]
    cert = np.load(RUN / "cert.npy", allow_pickle=False)
    test = np.load(RUN / "test.npy", allow_pickle=False)
    assert load_script(SCRIPT).measure(cert, test, data["screen_rows"], [5, 10, 15, 20]) == shipped
