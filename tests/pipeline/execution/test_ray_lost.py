"""A Ray node (or worker, or the results it held) lost for good ends a run with one pacplan line
saying what died and the command that resumes it; the chunks finished before are kept.

Ray is faked at its driver calls (put, wait, get, cancel): tasks run in this process, and one
`ray.get` raises the error Ray raises once its retries are spent, so no node has to die."""

from __future__ import annotations

import json
import shlex
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import yaml

from helpers import SMALL_TOY_RUN, cli
from pacplan.config import parse_config
from pacplan.pipeline import pipeline
from pacplan.pipeline.execution.executors import (
    Executor,
    WorkersLost,
    WorldCache,
    WorldSpec,
    compute_task,
    make_executor,
)
from pacplan.pipeline.pipeline import run

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

ray = pytest.importorskip("ray")
CHUNKS = {"chunk_policies": 4, "chunk_seeds": 20}
CONFIG = {**SMALL_TOY_RUN, "executor": {"kind": "serial", **CHUNKS}}
ES_TASKS = 3  # 3 ES iterations of 4 environments × 4 perturbations: one task each
CERT_CHUNKS = 6  # 60 certification seeds × 6 policies on the 20 × 4 grid


class _DyingRay:
    """Ray's driver calls over in-process tasks: the `dies_at`-th `get` (from 0) raises
    `error`, and cancelling afterwards fails as it does on a cluster that is gone."""

    exceptions = ray.exceptions

    def __init__(self, error: BaseException, dies_at: int) -> None:
        self.error, self.dies_at, self.got = error, dies_at, 0

    def put(self, obj: Any) -> Any:
        return obj

    def wait(self, pending: list, num_returns: int = 1) -> tuple[list, list]:
        return pending[:num_returns], pending[num_returns:]

    def get(self, ref: Callable[[], Any]) -> Any:
        if self.got == self.dies_at:
            raise self.error
        self.got += 1
        return ref()

    def cancel(self, ref: Any, force: bool = False) -> None:
        raise ray.exceptions.RaySystemError("the cluster is gone")


def _dying_ray_executor(error: BaseException, dies_at: int) -> Executor:
    """A `RayExecutor` whose Ray is `_DyingRay` (no cluster is started)."""
    from pacplan.pipeline.execution.ray_executor import RayExecutor

    ex = RayExecutor.__new__(RayExecutor)
    Executor.__init__(ex, **CHUNKS)
    worlds = WorldCache()
    ex._ray, ex._started, ex._per_node = _DyingRay(error, dies_at), False, Counter()
    ex._fn = SimpleNamespace(remote=lambda spec, task: lambda: (
        "10.0.0.6", compute_task(worlds.get(spec), spec, task)))
    return ex


RESULT_LOST = "a task's result was lost with the node that held it"
LOST = [
    (ray.exceptions.NodeDiedError("node 10.0.0.6 died"), "a Ray node died"),
    (ray.exceptions.WorkerCrashedError(), "a Ray worker process died"),
    (ray.exceptions.ActorDiedError(), "a Ray worker process died"),
    (ray.exceptions.OwnerDiedError("ab" * 14, None, "call site"), RESULT_LOST),
    (ray.exceptions.ObjectLostError("ab" * 14, None, "call site"), RESULT_LOST),
    (ray.exceptions.OutOfMemoryError("memory"), "Ray killed a worker for memory"),
    (ray.exceptions.LocalRayletDiedError(), "this machine's Ray node died"),
    (ray.exceptions.RaySystemError("raylet gone"), "the Ray cluster failed"),
]


@pytest.mark.parametrize(("error", "words"), LOST, ids=lambda v: type(v).__name__)
def test_rays_lost_work_is_one_named_error_after_the_finished_chunks(error: BaseException,
                                                                     words: str) -> None:
    thetas = np.random.default_rng(0).normal(size=(8, 4)).astype(np.float32)
    seeds = np.arange(60)
    spec = WorldSpec("toy", {"dim": 4})
    got = []
    with pytest.raises(WorkersLost) as caught:
        for chunk in _dying_ray_executor(error, dies_at=4).iter_chunks(spec, thetas, seeds):
            got.append(chunk)
    line = str(caught.value)
    assert line.startswith(f"{words} while computing costs for world 'toy' "
                           f"({type(error).__name__}")
    assert line.endswith("Ray's retries did not recover it") and "\n" not in line
    full = make_executor("serial", **CHUNKS).cost_matrix(spec, thetas, seeds)
    assert len(got) == 4 and all(np.array_equal(c.block, full[c.seeds, c.thetas]) for c in got)


def test_a_dead_node_ends_pacplan_run_with_the_resume_line_and_keeps_the_chunks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    out = tmp_path / "run"
    kept = 4
    dying = _dying_ray_executor(ray.exceptions.NodeDiedError("node 10.0.0.6 died"),
                                dies_at=ES_TASKS + kept)
    monkeypatch.setattr(pipeline, "executor_from_config", lambda _cfg: dying)
    args = ["run", str(config), "--out", str(out), "--quiet"]
    code, _, err = cli(args, capsys)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("error: a Ray node died while computing costs for world 'toy' "
                           "(NodeDiedError: node 10.0.0.6 died); Ray's retries did not "
                           "recover it; finished work is kept in the run directory; resume "
                           "with: ")
    assert shlex.split(line.split("resume with: ", 1)[1]) == ["pacplan", *args]
    timings = json.loads((out / "timings.json").read_text())
    assert timings[-1]["interrupted"] and timings[-1]["rollouts"]["cert costs"] > 0

    monkeypatch.undo()
    said: list[str] = []
    run(parse_config(CONFIG), out, progress=False, log=said.append)
    assert f"resumed: cert costs, {kept} of {CERT_CHUNKS} chunks kept" in said
    clean = tmp_path / "clean"
    run(parse_config(CONFIG), clean, progress=False)
    for name in ("prior.safetensors", "policies.npy", "costs/cert.npy", "costs/test.npy"):
        assert (out / name).read_bytes() == (clean / name).read_bytes(), name


def test_a_dead_process_worker_ends_pacplan_run_with_the_resume_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A process-pool worker killed mid-chunk (the toy world's `crash_on_seed` calls
    os._exit) is reported as Ray's lost nodes are: one line, exit 2, the resume command."""
    crashing = {**SMALL_TOY_RUN, "world": {"name": "toy", "options": {
        **SMALL_TOY_RUN["world"]["options"], "crash_on_seed": 10_045}},
        "executor": {"kind": "processes", "workers": 2, **CHUNKS}}
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(crashing))
    args = ["run", str(config), "--out", str(tmp_path / "run"), "--quiet"]
    code, _, err = cli(args, capsys)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.startswith("error: a worker process died while computing costs for world "
                           "'toy' (crash or out of memory")
    assert shlex.split(line.split("resume with: ", 1)[1]) == ["pacplan", *args]
