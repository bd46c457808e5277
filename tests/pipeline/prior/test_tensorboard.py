"""ES metrics as TensorBoard scalars: read back with tensorboard's own EventAccumulator, they
are metrics.jsonl's values (as float32, TensorBoard's scalar type), each iteration once, also
after a crash and a resume; and writing them changes no artifact (`pacplan compare` agrees
with a run that wrote none)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN
from pacplan.config import parse_config
from pacplan.es import checkpoint as ckpt
from pacplan.pipeline.compare import Agreement, compare_runs
from pacplan.pipeline.prior.tensorboard import PREFIX, SWITCH
from pacplan.pipeline.prior.training import train_prior
from pacplan.pipeline.rundir import RunDir

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

pytest.importorskip("tensorboard")

CONFIG = {**SMALL_TOY_RUN, "name": "toy-tensorboard",
          "es": {**SMALL_TOY_RUN["es"], "iterations": 4}}


def _train(out: Path, stop_after: int | None = None) -> None:
    cfg = parse_config(json.loads(json.dumps(CONFIG)))
    train_prior(cfg, out, progress=False, stop_after=stop_after)


def _events(run: Path) -> dict[str, list[tuple[int, float]]]:
    """{tag: [(step, value), …]} of every scalar in the run's TensorBoard folder."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = sorted((run / RunDir.TENSORBOARD).glob("events.out.tfevents.*"))
    assert len(files) == 1, files  # one file: rebuilt at each start, never appended twice
    acc = EventAccumulator(str(files[0]), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _expected(run: Path) -> dict[str, list[tuple[int, float]]]:
    """The oracle: metrics.jsonl's numeric fields by iteration, rounded to float32."""
    out: dict[str, list[tuple[int, float]]] = {}
    for record in ckpt.read_metrics(run / RunDir.METRICS):
        for key, value in record.items():
            if key != "iteration" and isinstance(value, int | float):
                out.setdefault(PREFIX + key, []).append(
                    (record["iteration"], float(np.float32(value))))
    return out


def _same(a: dict[str, list[tuple[int, float]]], b: dict[str, Any]) -> None:
    assert sorted(a) == sorted(b)
    for tag in a:
        assert a[tag] == b[tag], tag


def test_scalars_are_the_es_log(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(SWITCH, raising=False)
    _train(tmp_path / "run")
    events, expected = _events(tmp_path / "run"), _expected(tmp_path / "run")
    assert {"es/cost", "es/best", "es/sigma_mean", "es/grad_mu_norm", "es/utility"} <= set(events)
    assert [step for step, _ in events["es/cost"]] == list(range(4))
    _same(events, expected)
    manifest = json.loads((tmp_path / "run" / RunDir.MANIFEST).read_text()) \
        if (tmp_path / "run" / RunDir.MANIFEST).exists() else {}
    assert "tensorboard" not in json.dumps(manifest)


def test_resume_after_a_crash_shows_each_iteration_once(tmp_path: Path, monkeypatch) -> None:
    """Killed after iteration 2 was logged (metrics.jsonl and an event file) but before its
    checkpoint: the resumed run redoes iteration 2, and TensorBoard holds it once, with the
    values metrics.jsonl keeps."""
    from pacplan.pipeline.prior.tensorboard import ScalarLog

    monkeypatch.delenv(SWITCH, raising=False)
    run = tmp_path / "run"
    _train(run, stop_after=2)
    metrics = run / RunDir.METRICS
    line = metrics.read_text().splitlines()[-1]
    cut = json.loads(line) | {"iteration": 2, "cost": 0.123}
    with metrics.open("a") as fh:  # the crash: a log line whose checkpoint was never saved
        fh.write(json.dumps(cut) + "\n")
    stale = ScalarLog(tmp_path / "stale", [cut])  # and its event, in a second event file
    stale.close()
    for event_file in (tmp_path / "stale").iterdir():
        event_file.rename(run / RunDir.TENSORBOARD / (event_file.name + ".stale"))
    assert len(list((run / RunDir.TENSORBOARD).iterdir())) == 2
    _train(run)
    events = _events(run)
    assert [step for step, _ in events["es/cost"]] == list(range(4))
    _same(events, _expected(run))
    straight = tmp_path / "straight"
    _train(straight)
    for tag in ("es/cost", "es/best", "es/sigma_mean"):
        assert events[tag] == _events(straight)[tag]


def test_switched_off_and_on_the_artifacts_agree(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(SWITCH, "0")
    _train(tmp_path / "without")
    assert not (tmp_path / "without" / RunDir.TENSORBOARD).exists()
    monkeypatch.delenv(SWITCH)
    _train(tmp_path / "with")
    assert (tmp_path / "with" / RunDir.TENSORBOARD).is_dir()
    assert isinstance(compare_runs(tmp_path / "with", tmp_path / "without"), Agreement)
    for name in (RunDir.PRIOR, RunDir.ES_STATE):
        assert (tmp_path / "with" / name).read_bytes() == (tmp_path / "without" / name
                                                             ).read_bytes()
