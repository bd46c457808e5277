"""scripts/ship_result.py: a finished run copied as a shipped result names its input files
relative to its own folder, verifies, and resumes computing nothing (the oracle: the pipeline's
own count of what it computes, and the files the paths name, compared byte for byte)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN, CountingExecutor, load_script
from pacplan.config import load_config, parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.pipeline import run

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ship_result.py"


def _cfg(weights: Path) -> Any:
    data = json.loads(json.dumps(SMALL_TOY_RUN))
    data["baselines"] = [{"name": "zeros"}, {"name": "fixed", "weights": str(weights)}]
    return parse_config(data)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A run given its prior and a baseline's weights from a folder of their own."""
    base = tmp_path_factory.mktemp("ship")
    inputs = base / "inputs"
    inputs.mkdir()
    np.save(inputs / "w.npy", np.full(4, 0.3, dtype=np.float32))
    run(_cfg(inputs / "w.npy"), base / "trained", progress=False)
    shutil.copy(base / "trained" / "prior.safetensors", inputs / "p.safetensors")
    run(_cfg(inputs / "w.npy"), base / "runs" / "given", prior_file=inputs / "p.safetensors",
        progress=False)
    return {"base": base, "inputs": inputs, "run": base / "runs" / "given"}


def test_a_shipped_run_names_its_files_from_its_folder_and_resumes_as_done(
        finished: dict[str, Path]) -> None:
    dest = finished["base"] / "results" / "given"
    named = load_script(SCRIPT).ship(finished["run"], dest)
    assert named == {"prior": "../../inputs/p.safetensors",
                     "baselines[1].weights": "../../inputs/w.npy"}
    frozen = (dest / "config.yaml").read_text()
    assert "prior: ../../inputs/p.safetensors" in frozen and str(finished["base"]) not in frozen
    cfg = load_config(dest / "config.yaml")
    assert Path(cfg.prior).read_bytes() == (finished["inputs"] / "p.safetensors").read_bytes()
    assert not (dest / "run.lock").exists() and not list(dest.rglob("*.chunks"))
    ex = CountingExecutor(chunk_policies=8, chunk_seeds=30)
    run(cfg, dest, progress=False, executor=ex)  # the shipped folder is a finished run
    assert ex.cells == 0
    # a clone moved elsewhere with its inputs still reads them
    moved = finished["base"].parent / (finished["base"].name + "-moved")
    shutil.copytree(finished["base"], moved)
    assert Path(load_config(moved / "results" / "given" / "config.yaml").prior).parent == (
        moved / "inputs").resolve()


def test_own_prior_names_the_runs_copy(finished: dict[str, Path], tmp_path: Path) -> None:
    dest = tmp_path / "own"
    named = load_script(SCRIPT).ship(finished["run"], dest, own_prior=True)
    assert named["prior"] == "prior.safetensors"
    assert load_config(dest / "config.yaml").prior == str((dest / "prior.safetensors").resolve())


def test_what_cannot_ship_is_refused_and_nothing_is_written(finished: dict[str, Path],
                                                            tmp_path: Path) -> None:
    ship = load_script(SCRIPT).ship
    with pytest.raises(PacplanError, match="already exists"):
        ship(finished["run"], tmp_path)
    unfinished = tmp_path / "unfinished"
    shutil.copytree(finished["run"], unfinished)
    (unfinished / "certificate.json").unlink()
    with pytest.raises(PacplanError, match=r"has no certificate\.json: finish it"):
        ship(unfinished, tmp_path / "a")
    gone = tmp_path / "gone"
    shutil.copytree(finished["run"], gone)
    cfg = (gone / "config.yaml").read_text()
    (gone / "config.yaml").write_text(cfg.replace("w.npy", "missing.npy"))
    with pytest.raises(PacplanError, match=r"names weights: .*missing.npy, which is not there"):
        ship(gone, tmp_path / "b")
    damaged = tmp_path / "damaged"
    shutil.copytree(finished["run"], damaged)
    test = damaged / "costs" / "test.npy"
    np.save(test, np.load(test) * 0.5)
    with pytest.raises(PacplanError):
        ship(damaged, tmp_path / "c")
    assert not any((tmp_path / n).exists() for n in "abc")


def test_the_command_line_says_the_paths_or_the_error(finished: dict[str, Path],
                                                      tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    main = load_script(SCRIPT).main
    assert main([str(finished["run"]), str(tmp_path / "ok"), "--own-prior"]) == 0
    assert json.loads(capsys.readouterr().out)["prior"] == "prior.safetensors"
    assert main([str(finished["run"]), str(tmp_path / "ok")]) == 2
    assert "already exists" in capsys.readouterr().err
