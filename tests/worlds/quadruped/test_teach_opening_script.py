"""scripts/teach_opening.py on two terrains in the MuJoCo twin: it writes a prior whose record
says how it was taught, resumes without walking again, and refuses a folder taught otherwise."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mujoco")

from helpers import load_script
from pacplan.es.checkpoint import load_prior, read_prior_file
from pacplan.io.files import safetensors_metadata

pytestmark = pytest.mark.slow  # about 20 CPU-s: rounds, fits and evaluations, however small

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "teach_opening.py"


def test_teaching_writes_a_recorded_prior_and_resumes(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    teach = load_script(SCRIPT)
    sigterm = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "opening"
    args = ["--out", str(out), "--physics", "mujoco", "--steep", "1", "--ordinary", "1",
            "--rounds", "1", "--eval-steep", "1", "--eval-ordinary", "1", "--iterations", "5",
            "--workers", "1"]
    teach.main(args)
    first = json.loads(capsys.readouterr().out)
    assert signal.getsignal(signal.SIGTERM) is sigterm  # the script's handler was put back
    prior = read_prior_file(out / "prior.safetensors")
    record = json.loads(safetensors_metadata((out / "prior.safetensors").read_bytes())["distill"])
    assert record["chosen_round"] in (0, 1) and len(record["rounds"]) == 2
    assert prior.world == {"name": "quadruped",
                           "options": {"variant": "paper-code", "physics": "mujoco"}}
    base_mu, base_logvar = load_prior(teach.BASE)
    mu, logvar = load_prior(out / "prior.safetensors")
    np.testing.assert_array_equal(logvar, base_logvar)  # the base prior's σ
    assert not np.array_equal(mu, base_mu)  # the fit moved the weights
    lines = (out / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["round"] for x in lines] == [-1, 0, 1]
    assert (out / "figures" / "training.png").read_bytes()[:4] == b"\x89PNG"
    ledger = (out / "ledger.jsonl").read_text()
    teach.main(args)  # resumed: nothing walked or fitted again, the same prior
    again = json.loads(capsys.readouterr().out)
    assert (out / "ledger.jsonl").read_text() == ledger
    assert again["rounds"] == first["rounds"]
    with pytest.raises(SystemExit, match="other inputs"):
        teach.main([*args, "--pull", "0.5"])
