"""A run says what it is doing when it would otherwise be silent: where a resumed run picks up
(the ES iteration, how many cost chunks it keeps, counted here from the chunk grid) and a
world's first-call warm-up (the UAV's torch.compile)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from helpers import SMALL_TOY_RUN, StopAfter
from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.plan import plan_n
from pacplan.pipeline.prior.training import train_prior
from pacplan.worlds import base
from pacplan.worlds.toy import ToyWorld
from pacplan.worlds.uav import UAVWorld

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


def _config() -> Any:
    data = {**SMALL_TOY_RUN, "executor": {"kind": "serial", "chunk_policies": 4,
                                          "chunk_seeds": 20}}
    return parse_config(data)


def test_resume_says_the_es_iteration_it_continues_from(tmp_path: Path) -> None:
    cfg = _config()
    train_prior(cfg, tmp_path / "run", progress=False, stop_after=2)
    said: list[str] = []
    run(cfg, tmp_path / "run", progress=False, log=said.append)
    assert f"resumed: ES at iteration 2 of {cfg.es.iterations}" in said


def test_resume_says_how_many_cost_chunks_it_keeps(tmp_path: Path) -> None:
    cfg = _config()
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out, progress=False, executor=StopAfter(3, chunk_policies=4, chunk_seeds=20))
    n_cert = max(cfg.certificate.n)
    total = math.ceil(n_cert / 20) * math.ceil(cfg.policies.m / 4)
    said: list[str] = []
    run(cfg, out, progress=False, log=said.append)
    assert f"resumed: cert costs, 3 of {total} chunks kept" in said
    assert not any(s.startswith("resumed: ES") for s in said)  # the prior was finished: kept


class WarmToy(ToyWorld):
    """The toy world with a first-call note, as the UAV world has for torch.compile."""

    @staticmethod
    def warmup_note(**_: Any) -> str:
        return "warm-toy: the first call compiles"


def test_a_worlds_warmup_note_is_said_until_its_matrices_are_finished(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(base._REGISTRY, "warm-toy", base.WorldEntry(f"{__name__}:WarmToy"))
    data = {**SMALL_TOY_RUN, "world": {**SMALL_TOY_RUN["world"], "name": "warm-toy"}}
    cfg = parse_config(data)
    said: list[str] = []
    run(cfg, tmp_path / "run", progress=False, log=said.append)
    again: list[str] = []
    run(cfg, tmp_path / "run", progress=False, log=again.append)
    assert said.count("warm-toy: the first call compiles") == 1
    assert "warm-toy: the first call compiles" not in again  # nothing left to compute
    assert UAVWorld.warmup_note() is not None and "torch.compile" in UAVWorld.warmup_note()
    assert UAVWorld.warmup_note(compile=False) is None
    assert UAVWorld.warmup_note(simulator="bullet") is None


def test_timings_count_only_the_rollouts_computed_and_plan_n_uses_them(tmp_path: Path) -> None:
    """A resumed run records the rollouts it computed (kept chunks excluded), so `plan-n`'s
    rate is this machine's, not inflated by work done before (issue 21's 'about 2.6 h' that was
    4 h); a history older than that record falls back to the whole matrix. An unfinished run is
    predicted from its whole leading rows, as the finished run predicts from the same rows; an
    interrupted invocation's time and rollouts are recorded too."""
    cfg = _config()
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out, progress=False, executor=StopAfter(3, chunk_policies=4, chunk_seeds=20))
    ledger = (out / "costs/cert.chunks/ledger.jsonl").read_text().splitlines()
    kept = sum(math.prod(json.loads(line)["shape"]) for line in ledger)
    total = max(cfg.certificate.n) * cfg.policies.m
    assert len(ledger) == 3 and 0 < kept < total
    early = plan_n(out, 1000)  # while unfinished: from the rows its chunks hold whole
    assert early.rows == 20  # 2 chunks of 20 rows × (4 + 2) policies, the third half a row block
    run(cfg, out, progress=False)
    assert plan_n(out, 1000, rows=20).predicted_certified == early.predicted_certified
    stopped, entry = json.loads((out / "timings.json").read_text())
    assert stopped["interrupted"] and "interrupted" not in entry
    assert stopped["rollouts"]["cert costs"] == kept and "test costs" not in stopped["rollouts"]
    assert entry["rollouts"]["cert costs"] == total - kept
    assert entry["rollouts"]["test costs"] == (cfg.seeds.test[1] - cfg.seeds.test[0]) * 6
    # and the CPU time those rollouts took, step by step, the interrupted invocation's too
    for record in (stopped, entry):
        assert record["cpu_seconds"].keys() == record["rollouts"].keys()
        assert all(record["cpu_seconds"][k] > 0 for k, n in record["rollouts"].items() if n)
    both = stopped["seconds"]["cert costs"] + entry["seconds"]["cert costs"]
    assert plan_n(out, 1000).seconds_per_rollout == pytest.approx(both / total)
    (out / "timings.json").write_text(json.dumps([entry]))  # the resumed invocation alone
    seconds = entry["seconds"]["cert costs"]
    assert plan_n(out, 1000).seconds_per_rollout == pytest.approx(seconds / (total - kept))
    del entry["rollouts"]  # a run directory from before the record
    (out / "timings.json").write_text(json.dumps([entry]))
    assert plan_n(out, 1000).seconds_per_rollout == pytest.approx(seconds / total)


class RefusingToy(ToyWorld):
    """The toy world refusing the costs of certification seeds from `refuse_from` on (its
    third block of 20 rows), as a world refuses a NaN cost."""

    refuse_from = 10_040

    def costs(self, thetas: Any, seeds: Any) -> Any:
        if any(RefusingToy.refuse_from <= s < 10_060 for s in seeds):
            raise PacplanError("refusing-toy costs: 1 cost entries are NaN")
        return super().costs(thetas, seeds)


def test_a_run_stopped_by_a_worlds_error_keeps_its_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunks finished before a world's error are kept, and so is the time they took
    (issue 65's stage lost 215 chunks' timings to a NaN refusal); an error before any rollout
    writes no timings."""
    monkeypatch.setitem(base._REGISTRY, "refusing-toy",
                        base.WorldEntry(f"{__name__}:RefusingToy"))
    data = {**SMALL_TOY_RUN, "world": {**SMALL_TOY_RUN["world"], "name": "refusing-toy"},
            "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 20}}
    out = tmp_path / "run"
    with pytest.raises(PacplanError, match="NaN"):
        run(parse_config(data), out, progress=False)
    (entry,) = json.loads((out / "timings.json").read_text())
    assert entry["error"] == "refusing-toy costs: 1 cost entries are NaN"
    assert "interrupted" not in entry
    ledger = (out / "costs/cert.chunks/ledger.jsonl").read_text().splitlines()
    kept = sum(math.prod(json.loads(line)["shape"]) for line in ledger)
    assert len(ledger) == 4 and entry["rollouts"]["cert costs"] == kept == 40 * 6
    assert entry["cpu_seconds"]["cert costs"] > 0
    monkeypatch.setattr(RefusingToy, "refuse_from", 10_000)  # refused before any rollout
    with pytest.raises(PacplanError, match="NaN"):
        run(parse_config(data), out, progress=False)
    assert len(json.loads((out / "timings.json").read_text())) == 1


def test_sigterm_stops_a_run_as_ctrl_c_does(tmp_path: Path) -> None:
    """`kill` (SIGTERM) on `pacplan run`: exit 130 with the resume line, the interrupted time
    on record, the ES checkpoint kept (a resume continues from it)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    data = {**SMALL_TOY_RUN, "es": {**SMALL_TOY_RUN["es"], "iterations": 100_000}}
    config = tmp_path / "long.yaml"
    config.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-c", "from pacplan.cli import main; main()", "run",
                             str(config), "--out", str(out), "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (out / "es_state.json").is_file() and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; finished work is kept in the run directory; resume with" in err
    (entry,) = json.loads((out / "timings.json").read_text())
    assert entry["interrupted"] and entry["seconds"]["prior"] > 0
    assert json.loads((out / "es_state.json").read_text())["iteration"] >= 1


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_a_signal_to_the_whole_process_group_stops_a_parallel_run(tmp_path: Path,
                                                                   signum: str) -> None:
    """`timeout`, batch schedulers and Ctrl-C signal the driver and its pool workers at once.
    With tasks larger than a pipe's buffer (here 6 policies of 20,000 weights, ~480 kB; a
    quadruped task is ~190 kB) a worker killed that way used to hang the driver's pool
    shutdown for good. Now the run stops with the resume line, its finished chunks kept."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import yaml

    data = {**SMALL_TOY_RUN, "world": {"name": "toy", "options": {"dim": 20_000, "shift": 0.3}},
            "seeds": {**SMALL_TOY_RUN["seeds"], "cert": [10_000, 4_010_000],
                      "test": [5_000_000, 5_000_050]},
            "certificate": {"n": [30, 4_000_000], "delta": 0.05},
            "executor": {"kind": "processes", "workers": 2, "chunk_policies": 6,
                         "chunk_seeds": 20}}
    config = tmp_path / "long.yaml"
    config.write_text(yaml.safe_dump(data))
    out = tmp_path / "run"
    # A shell starts a background job (`pytest &`) with SIGINT ignored, which the run would
    # inherit; a user's `pacplan run` in a terminal has Python's own handler, so this one does.
    proc = subprocess.Popen([sys.executable, "-c", "from pacplan.cli import main; main()", "run",
                             str(config), "--out", str(out), "--quiet"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    chunks = out / "costs" / "cert.chunks"
    deadline = time.monotonic() + 120
    while len(list(chunks.glob("*.npy"))) < 3 and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.1)
    os.killpg(proc.pid, getattr(signal, signum))
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{signum} to the process group left `pacplan run` hanging")
    assert proc.returncode == 130, err
    assert "interrupted; finished work is kept in the run directory; resume with" in err
    assert len(list(chunks.glob("*.npy"))) >= 3
