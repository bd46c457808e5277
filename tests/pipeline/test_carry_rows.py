"""scripts/carry_rows.py: a finished stage run's work moves into the bigger run, and an unfinished
big run's leading rows into a stage; the receiving run then keeps it and finishes exactly as a
run computed from scratch (the oracle: `compare_runs` against that run, byte-equal matrices and
the resumed run's own count of kept chunks)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN, StopAfter, load_script
from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.compare import Agreement, compare_runs
from pacplan.pipeline.execution.chunks import ChunkStore
from pacplan.pipeline.pipeline import run

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "carry_rows.py"
CHUNKS = {"chunk_policies": 4, "chunk_seeds": 10}
BIG = {**SMALL_TOY_RUN, "name": "toy-big", "executor": {"kind": "serial", **CHUNKS},
       "baselines": [{"name": "zeros"}]}
STAGE = {**BIG, "name": "toy-stage", "certificate": {"n": [30], "delta": 0.05}}


def _script() -> Any:
    return load_script(SCRIPT)


def _run(data: dict, out: Path, **kw: Any) -> None:
    run(parse_config(json.loads(json.dumps(data))), out, progress=False, **kw)


def _started(data: dict, out: Path, chunks: int = 1) -> Path:
    """A run stopped (as by Ctrl-C) after `chunks` chunks of its certification matrix."""
    with pytest.raises(KeyboardInterrupt):
        _run(data, out, executor=StopAfter(chunks, **CHUNKS))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("carry")
    _run(BIG, base / "reference")
    _run(STAGE, base / "stage")
    return {"reference": base / "reference", "stage": base / "stage"}


def test_a_carried_stage_is_kept_and_the_run_ends_as_one_from_scratch(
        runs: dict[str, Path], tmp_path: Path) -> None:
    big = _started(BIG, tmp_path / "big")
    result = _script().carry(runs["stage"], big)
    # 30 of 60 rows in chunks of 10 rows × 4 policies (6 policies: 2 chunks per row block)
    assert result == {"rows": 30, "chunks_kept": 1, "chunks_added": 5,
                      "copied": ["costs/baseline-zeros.npy", "costs/test.npy"]}
    said: list[str] = []
    _run(BIG, big, log=said.append)
    assert "resumed: cert costs, 6 of 12 chunks kept" in said
    assert isinstance(compare_runs(runs["reference"], big), Agreement)
    for name in ("costs/cert.npy", "costs/test.npy", "costs/baseline-zeros.npy"):
        assert (big / name).read_bytes() == (runs["reference"] / name).read_bytes(), name


def test_an_unfinished_big_runs_leading_rows_finish_a_stage(runs: dict[str, Path],
                                                           tmp_path: Path) -> None:
    """5 chunks of the big run: rows 0–19 whole (2 chunks of 4 + 2 policies each), rows 20–29
    only for policies 0–3, so 20 rows are carried and the stage computes the rest."""
    big = _started(BIG, tmp_path / "big", chunks=5)
    stage = _started(STAGE, tmp_path / "stage")
    result = _script().carry(big, stage)
    assert result == {"rows": 20, "chunks_kept": 1, "chunks_added": 3, "copied": []}
    said: list[str] = []
    _run(STAGE, stage, log=said.append)
    assert "resumed: cert costs, 4 of 6 chunks kept" in said
    assert isinstance(compare_runs(runs["stage"], stage), Agreement)
    assert (stage / "costs/cert.npy").read_bytes() == (runs["stage"] / "costs/cert.npy"
                                                       ).read_bytes()


def test_what_the_big_run_does_not_compute_is_refused(runs: dict[str, Path],
                                                      tmp_path: Path) -> None:
    carry = _script().carry
    other_test = _started({**BIG, "seeds": {**BIG["seeds"], "test": [20_000, 20_040]}},
                          tmp_path / "other-test")
    with pytest.raises(PacplanError, match="different test seeds"):
        carry(runs["stage"], other_test)
    other_world = _started({**BIG, "world": {"name": "toy", "options": {"dim": 4,
                                                                      "shift": 0.2}}},
                           tmp_path / "other-world")
    with pytest.raises(PacplanError, match=r"differ in `world` \(shift: 0.3 and 0.2\)"):
        carry(runs["stage"], other_world)
    with pytest.raises(PacplanError, match="no finished certification rows"):
        carry(_started(BIG, tmp_path / "one-chunk"), _started(STAGE, tmp_path / "stage"))
    with pytest.raises(PacplanError, match="finished its certification matrix already"):
        carry(runs["reference"], runs["stage"])
    regrid = {**BIG, "executor": {"kind": "serial", "chunk_policies": 3, "chunk_seeds": 10}}
    with pytest.raises(PacplanError, match="chunk grids differ"):
        carry(runs["stage"], _started(regrid, tmp_path / "regrid"))
    shifted = _started({**BIG, "seeds": {**BIG["seeds"], "cert": [10_010, 10_070]}},
                       tmp_path / "shifted")
    with pytest.raises(PacplanError, match="start at different seeds"):
        carry(runs["stage"], shifted)
    # a chunk the big run already has must be the stage's, byte for byte
    big = _started(BIG, tmp_path / "big")
    folder = big / "costs" / "cert.chunks"
    block = np.load(folder / "s000000000_t000000.npy")
    (folder / "ledger.jsonl").write_text("")  # unlisted: ignored, then carried
    stamp = json.loads((folder / ChunkStore.STAMP).read_text())["inputs"]
    ChunkStore(folder, stamp).save((0, 0), block * 0.5)  # listed, other values
    with pytest.raises(PacplanError, match=r"s000000000_t000000\.npy .*differs"):
        carry(runs["stage"], big)
    (folder / "ledger.jsonl").write_text("")
    assert carry(runs["stage"], big)["chunks_added"] == 6


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "run.lock"}


def test_nothing_is_written_before_every_input_is_checked(
        runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped path used to exit 2 having created <missing>/run.lock (the lock made the
    folder); a chunk that differs, found after others were added, left those behind."""
    script = _script()
    missing, plain = tmp_path / "missing", tmp_path / "plain"
    plain.mkdir()
    for source, dest in ((runs["stage"], missing), (missing, runs["stage"]),
                         (plain, runs["stage"])):
        with pytest.raises(PacplanError, match="not a run directory"):
            script.carry(source, dest)
    assert not missing.exists() and list(plain.iterdir()) == []
    assert script.main([str(runs["stage"]), str(missing)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and str(missing) in err
    assert not missing.exists()

    big = _started(BIG, tmp_path / "big")  # chunk (0, 0) of 6 to carry: the last one differs
    folder = big / "costs" / "cert.chunks"
    stamp = json.loads((folder / ChunkStore.STAMP).read_text())["inputs"]
    ChunkStore(folder, stamp).save((20, 4), np.zeros((10, 2)) + 0.5)
    before = _files(big)
    with pytest.raises(PacplanError, match=r"s000000020_t000004\.npy .*differs"):
        script.carry(runs["stage"], big)
    assert _files(big) == before


SCREEN = {"rows": 30, "keep": 2}
BIG_SCREENED = {**BIG, "name": "toy-big-screened",
                "certificate": {**BIG["certificate"], "screen": SCREEN}}
STAGE_SCREENED = {**STAGE, "name": "toy-stage-screened",
                  "certificate": {**STAGE["certificate"], "screen": SCREEN}}


def test_a_screened_stage_carries_its_rows_and_test_matrix_not_its_screened_rows(
        tmp_path: Path) -> None:
    """The stage screens its 30 rows as the big run does; carried, the big run computes only
    its kept policies' other rows and ends as the big run computed from scratch."""
    _run(BIG_SCREENED, tmp_path / "reference")
    _run(STAGE_SCREENED, tmp_path / "stage")
    big = _started(BIG_SCREENED, tmp_path / "big")
    result = _script().carry(tmp_path / "stage", big)
    assert result["rows"] == 30
    assert result["copied"] == ["costs/baseline-zeros.npy", "costs/test.npy"]
    _run(BIG_SCREENED, big)
    for name in ("costs/cert.npy", "costs/cert-rest.npy", "costs/cert-screened.npy",
                 "costs/test.npy"):
        assert (big / name).read_bytes() == (tmp_path / "reference" / name).read_bytes(), name
    assert isinstance(compare_runs(tmp_path / "reference", big), Agreement)
    stage_cert = json.loads((tmp_path / "stage" / "certificates" / "N30.json").read_text())
    big_cert = json.loads((big / "certificates" / "N30.json").read_text())
    assert stage_cert["certified"] == big_cert["certified"]
    assert stage_cert["columns"] == big_cert["columns"]


def test_a_big_run_past_its_screening_rows_takes_the_stages_test_matrix(
        tmp_path: Path) -> None:
    """The big run screened already (its first-stage matrix finished, one chunk of its other
    rows): the stage gives it only its test and baseline matrices, and it ends as the big run
    computed from scratch."""
    _run(BIG_SCREENED, tmp_path / "reference")
    _run(STAGE_SCREENED, tmp_path / "stage")
    big = _started(BIG_SCREENED, tmp_path / "big", chunks=7)  # 6 first-stage chunks, then 1
    assert (big / "costs" / "cert.npy").is_file() and not (big / "costs" / "test.npy").exists()
    result = _script().carry(tmp_path / "stage", big)
    assert result == {"rows": 30, "chunks_kept": 0, "chunks_added": 0,
                      "copied": ["costs/baseline-zeros.npy", "costs/test.npy"]}
    said: list[str] = []
    _run(BIG_SCREENED, big, log=said.append)
    assert "resumed: cert-rest costs, 1 of 3 chunks kept" in said
    assert not any(line.startswith("resumed: test") for line in said)
    for name in ("costs/cert.npy", "costs/cert-rest.npy", "costs/test.npy"):
        assert (big / name).read_bytes() == (tmp_path / "reference" / name).read_bytes(), name
    assert isinstance(compare_runs(tmp_path / "reference", big), Agreement)
    with pytest.raises(PacplanError, match="nothing to carry"):
        _script().carry(tmp_path / "stage", big)


def test_runs_that_screen_differently_are_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    big = _started(BIG_SCREENED, tmp_path / "big")
    with pytest.raises(PacplanError, match="the runs screen differently"):
        _script().carry(runs["stage"], big)


def test_baselines_move_into_a_run_of_another_prior(runs: dict[str, Path], tmp_path: Path
                                                    ) -> None:
    """A baseline's costs do not depend on the run's policies: `--baselines` copies them into
    a run with other policies (here: another policies.seed), which then flies none of them."""
    other = {**BIG, "name": "toy-other", "policies": {**BIG["policies"], "seed": 11}}
    dest = _started(other, tmp_path / "other")
    code = _script().main(["--baselines", str(runs["reference"]), str(dest)])
    assert code == 0
    _run(other, dest)
    timings = json.loads((dest / "timings.json").read_text())
    assert timings[-1]["rollouts"]["baseline zeros"] == 0  # kept, not flown again
    name = "costs/baseline-zeros.npy"
    assert (dest / name).read_bytes() == (runs["reference"] / name).read_bytes()
    fresh = tmp_path / "fresh"
    _run(other, fresh)
    assert (fresh / name).read_bytes() == (dest / name).read_bytes()
    with pytest.raises(PacplanError, match="no finished baseline matrix that"):
        _script().carry(runs["reference"], dest, baselines_only=True)
