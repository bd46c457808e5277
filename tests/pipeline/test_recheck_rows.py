"""scripts/recheck_rows.py: sampled certification rows recomputed on this machine match the
stored ones bit for bit, from a finished matrix and from a chunk folder still being filled; a
world that now computes other bits (here, costs moved by one ulp) is caught and named."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN, StopAfter, load_script
from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.io.yamlio import read_yaml, yaml_text
from pacplan.pipeline.pipeline import run
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


def _edit_config(run_dir: Path, change: Any) -> None:
    data = read_yaml(run_dir / "config.yaml")
    change(data)
    (run_dir / "config.yaml").write_text(yaml_text(data))


def test_a_changed_input_is_named_not_taken_for_a_cpu(script: Any, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A replaced policies.npy or an edited config recomputed other numbers and was reported as
    `bit_identical: false`, a CPU difference; the inputs are now checked by hash first."""
    finished, unfinished = tmp_path / "finished", tmp_path / "unfinished"
    run(parse_config(json.loads(json.dumps(DATA))), finished, progress=False)
    with pytest.raises(KeyboardInterrupt):
        run(parse_config(json.loads(json.dumps(DATA))), unfinished, progress=False,
            executor=StopAfter(3, **CHUNKS))
    for rd in (finished, unfinished):
        for name in ("policies.npy", "manifest.json", "config.yaml"):
            shutil.copyfile(rd / name, tmp_path / f"{rd.name}.{name}")

        def restore(rd: Path = rd) -> None:
            for name in ("policies.npy", "manifest.json", "config.yaml"):
                shutil.copyfile(tmp_path / f"{rd.name}.{name}", rd / name)

        thetas = np.load(rd / "policies.npy")
        np.save(rd / "policies.npy", (thetas * 1.5).astype(np.float32))
        with pytest.raises(PacplanError, match=r"policies\.npy in .* has changed"):
            script.recheck(rd, rows=2, seed=0, workers=1)
        manifest = json.loads((rd / "manifest.json").read_text())  # re-recorded: still refused
        manifest["policies.npy"]["sha256"] = hashlib.sha256((rd / "policies.npy").read_bytes()
                                                           ).hexdigest()
        (rd / "manifest.json").write_text(json.dumps(manifest))
        with pytest.raises(PacplanError, match=r"not the one its certification rows were "
                                               r"computed from .*not the CPU"):
            script.recheck(rd, rows=2, seed=0, workers=1)
        restore()
        _edit_config(rd, lambda d: d["world"]["options"].update(shift=0.2))
        with pytest.raises(PacplanError, match=r"asks for world .*\"shift\": 0\.2.*config\.yaml "
                                               "was edited, not the CPU"):
            script.recheck(rd, rows=2, seed=0, workers=1)
        assert script.main([str(rd), "--rows", "1", "--workers", "1"]) == 2
        out, err = capsys.readouterr()
        assert out == "" and len(err.strip().splitlines()) == 1 and "world" in err
        restore()
        _edit_config(rd, lambda d: d["seeds"].update(cert=[10_001, 10_061]))
        with pytest.raises(PacplanError, match=r"seeds \[10001, 10061\], but its rows were "
                                               r"computed for seeds \[10000, 10060\]"):
            script.recheck(rd, rows=2, seed=0, workers=1)
        restore()
        result = script.recheck(rd, rows=2, seed=0, workers=1)
        assert result["bit_identical"] and result["inputs_checked"]


@pytest.mark.parametrize(("args", "said"), [(["--seed", "-1"], "--seed must be"),
                                            (["--workers", "0"], "--workers must be"),
                                            (["--workers", "-2"], "--workers must be"),
                                            (["--rows", "0"], "--rows must be")])
def test_odd_arguments_are_one_line_refusals(script: Any, tmp_path: Path, args: list[str],
                                             said: str, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    """--seed -1 was numpy's ValueError traceback; --workers 0 or -2 ran serially unsaid."""
    assert script.main([str(tmp_path / "any-run"), *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and said in err and len(err.strip().splitlines()) == 1, err
