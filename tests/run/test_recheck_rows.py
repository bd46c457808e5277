"""scripts/recheck_rows.py: sampled certification rows recomputed on this machine match the
stored ones bit for bit, from a finished matrix and from a chunk folder still being filled; a
world that now computes other bits (here, costs moved by one ulp) is caught and named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN, StopAfter, load_script
from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.run.pipeline import run
from pacplan.worlds import base
from pacplan.worlds.toy import ToyWorld

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "recheck_rows.py"
CHUNKS = {"chunk_policies": 4, "chunk_seeds": 10}
DATA = {**SMALL_TOY_RUN, "world": {"name": "drift-toy", "options": {"dim": 4, "shift": 0.3}},
        "executor": {"kind": "serial", **CHUNKS}}
DRIFT = {"ulps": 0}


class DriftToy(ToyWorld):
    """The toy world, its costs moved up by DRIFT['ulps'] ulps (another machine's bits)."""

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        out = super().costs(thetas, seeds)
        for _ in range(DRIFT["ulps"]):
            out = np.nextafter(out, np.inf)
        return out


@pytest.fixture
def script(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setitem(base._REGISTRY, "drift-toy", base.WorldEntry(f"{__name__}:DriftToy"))
    monkeypatch.setitem(DRIFT, "ulps", 0)
    return load_script(SCRIPT)


def test_rows_recompute_to_the_same_bits_and_a_drift_is_named(script: Any,
                                                               tmp_path: Path) -> None:
    finished = tmp_path / "finished"
    run(parse_config(json.loads(json.dumps(DATA))), finished, progress=False)
    result = script.recheck(finished, rows=5, seed=0, workers=1)
    assert result["bit_identical"] and result["values_checked"] == 5 * 6
    assert result["rows_available"] == 60 and len(set(result["rows_checked"])) == 5

    unfinished = tmp_path / "unfinished"  # rows 0–9 whole (2 chunks), rows 10–19 half
    with pytest.raises(KeyboardInterrupt):
        run(parse_config(json.loads(json.dumps(DATA))), unfinished, progress=False,
            executor=StopAfter(3, **CHUNKS))
    result = script.recheck(unfinished, rows=3, seed=1, workers=1)
    assert result["bit_identical"] and result["rows_available"] == 10
    assert max(result["rows_checked"]) < 10

    DRIFT["ulps"] = 1
    result = script.recheck(finished, rows=2, seed=0, workers=1)
    assert not result["bit_identical"] and result["values_differing"] == 2 * 6
    first = result["first_difference"]
    assert first["recomputed"] == np.nextafter(first["stored"], np.inf)
    assert script.main([str(finished), "--rows", "1", "--workers", "1"]) == 1


def test_a_run_without_rows_is_refused(script: Any, tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match="no finished certification rows"):
        out = tmp_path / "started"
        with pytest.raises(KeyboardInterrupt):
            run(parse_config(json.loads(json.dumps(DATA))), out, progress=False,
                executor=StopAfter(1, **CHUNKS))
        script.recheck(out, rows=1, seed=0, workers=1)
    assert script.main([str(tmp_path / "started"), "--rows", "0"]) == 2
    (out / "costs" / "cert.chunks" / "inputs.json").write_text("{damaged")
    with pytest.raises(PacplanError, match="nor certification chunks of its own inputs"):
        script.recheck(out, rows=1, seed=0, workers=1)
