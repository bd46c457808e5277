"""Real faults: `pacplan run` is killed with SIGKILL during ES training, during a cost matrix and
during report writing, resumed each time, and ends bit-identical to an uninterrupted run.

Each kill is aimed by watching the run directory for the files a stage writes (the toy world's
`work` option makes rollouts slow enough to land inside a stage). About 8 s on 2 cores.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from pacplan.config import config_to_dict, parse_config
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.provenance import verify_certificate as verify

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

CONFIG = {
    "name": "toy-faults",
    "world": {"name": "toy", "options": {"dim": 6, "shift": 0.3, "work": 300}},
    "seeds": {"prior": [0, 300], "cert": [10_000, 10_240], "test": [20_000, 20_200]},
    "es": {"iterations": 30, "envs_per_iter": 4, "pairs_per_env": 4, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 40},
    "policies": {"m": 12, "seed": 3},
    "certificate": {"n": [120, 240], "delta": 0.05},
    "baselines": [{"name": "zeros"}],
    "report": {"trajectories": 0},
}
ARTIFACTS = ["prior.safetensors", "es_state.safetensors", "policies.npy", "costs/cert.npy",
             "costs/test.npy", "costs/baseline-zeros.npy", "certificate.json",
             "certificates/N120.json", "certificates/N240.json"]


def _hash(path: Path) -> str:
    """sha256 of the file; for a certificate, of its JSON without the `created` timestamp (and
    a checksum of the whole record, which covers the timestamp)."""
    if path.suffix != ".json":
        return hashlib.sha256(path.read_bytes()).hexdigest()
    data = json.loads(path.read_text())
    data.pop("created", None)
    data.pop("content_sha256", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def _start(cfg_file: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pacplan.cli", "run", str(cfg_file), "--out",
                             str(out), "--quiet"], env={**os.environ, "MPLBACKEND": "Agg"},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _kill_when(proc: subprocess.Popen, ready: Callable[[], bool], timeout: float = 300) -> None:
    """SIGKILL `proc` as soon as `ready()` holds; it must still be running then."""
    deadline = time.time() + timeout
    while not ready():
        assert proc.poll() is None, f"the run ended before the kill: {proc.stderr.read()}"
        assert time.time() < deadline, "the run never reached the kill point"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def _chunks(out: Path) -> int:
    return len(list((out / "costs" / "cert.chunks").glob("s*_t*.npy")))


def _report_figure(out: Path) -> bool:
    return (out / "figures" / "bounds_vs_n.png").exists()


def test_sigkill_in_es_matrix_and_report_then_resume_is_bit_identical(tmp_path: Path) -> None:
    cfg = parse_config(CONFIG)
    cfg_file = tmp_path / "toy.yaml"
    cfg_file.write_text(yaml.safe_dump(config_to_dict(cfg)))
    out = tmp_path / "killed"

    _kill_when(_start(cfg_file, out), lambda: (out / "es_state.safetensors").exists())
    assert not (out / "policies.npy").exists(), "killed during ES training"

    _kill_when(_start(cfg_file, out), lambda: _chunks(out) >= 2)
    assert not (out / "costs" / "cert.npy").exists(), "killed inside the certification matrix"

    _kill_when(_start(cfg_file, out), lambda: _report_figure(out))
    assert (out / "certificate.json").exists() and not (out / "report.md").exists(), (
        "killed while the report was written")

    last = _start(cfg_file, out)
    assert last.wait(timeout=300) == 0, last.stderr.read() if last.stderr else ""
    assert (out / "report.md").is_file()
    assert not (out / "costs" / "cert.chunks").exists()

    clean = tmp_path / "clean"
    run(cfg, clean, progress=False)
    assert {a: _hash(out / a) for a in ARTIFACTS} == {a: _hash(clean / a) for a in ARTIFACTS}
    verify(out / "certificate.json")
