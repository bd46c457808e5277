"""One run directory, one process: a second run is refused at once, naming the holder; the
kernel releases the lock when the holder dies (even by SIGKILL)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pacplan.config import config_to_dict, parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.prior.training import train_prior
from pacplan.pipeline.rundir import RunDir

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

BASE = {
    "name": "toy-lock",
    "world": {"name": "toy", "options": {"dim": 4}},
    "seeds": {"prior": [0, 100], "cert": [1000, 1200], "test": [2000, 2100]},
    "es": {"iterations": 2, "envs_per_iter": 4, "pairs_per_env": 2},
    "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 50},
    "policies": {"m": 4},
    "certificate": {"n": [200], "delta": 0.05},
    "report": {"trajectories": 0},
}

HOLD = """
import sys, time
from pacplan.pipeline.rundir import RunDir
with RunDir(sys.argv[1]).locked():
    print("locked", flush=True)
    time.sleep(120)
"""


def _cfg(**world_options):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["world"]["options"] |= world_options
    return parse_config(data)


def _hold(run_dir: Path) -> subprocess.Popen:
    """Another process holding the run directory's lock until killed."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run_dir)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def test_a_held_directory_is_refused_naming_the_holder(tmp_path: Path) -> None:
    holder = _hold(tmp_path)
    try:
        t0 = time.monotonic()
        for fn in (lambda: run(_cfg(), tmp_path, progress=False),
                   lambda: train_prior(_cfg(), tmp_path, progress=False)):
            with pytest.raises(PacplanError, match=rf"in use.*pid {holder.pid} on "
                               rf"{socket.gethostname()}.*since") as err:
                fn()
            assert "\n" not in str(err.value)
        assert time.monotonic() - t0 < 5, "refused at once, not after waiting"
        assert not (tmp_path / "config.yaml").exists(), "the refused run wrote nothing"
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    run(_cfg(), tmp_path, progress=False)  # the kernel released the dead holder's lock
    assert (tmp_path / "certificate.json").is_file()


def test_the_lock_is_reentrant_within_a_process(tmp_path: Path) -> None:
    """`run` trains the prior through `train_prior`, which locks the same directory."""
    rd = RunDir(tmp_path)
    with rd.locked(), rd.locked():
        run(_cfg(), tmp_path, progress=False)
    holder = _hold(tmp_path)  # released on leaving: another process can take it
    holder.send_signal(signal.SIGKILL)
    holder.wait()


def test_two_real_runs_on_one_out(tmp_path: Path) -> None:
    """Two `pacplan run` processes with different configs on one --out: the second one exits
    with code 2 and one line naming the first; the first finishes untouched."""
    slow, other = tmp_path / "slow.yaml", tmp_path / "other.yaml"
    slow_cfg = _cfg(work=3000)
    slow_cfg.es.iterations = 200
    slow.write_text(yaml.safe_dump(config_to_dict(slow_cfg)))
    other_cfg = _cfg()
    other_cfg.policies.m = 5
    other.write_text(yaml.safe_dump(config_to_dict(other_cfg)))
    out = tmp_path / "run"
    env = {**os.environ, "MPLBACKEND": "Agg"}
    first = subprocess.Popen([sys.executable, "-m", "pacplan.cli", "run", str(slow), "--out",
                              str(out), "--quiet"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline and not (out / "es_state.safetensors").exists():
            time.sleep(0.02)
        assert first.poll() is None, "the first run should still be training"
        second = subprocess.run([sys.executable, "-m", "pacplan.cli", "run", str(other), "--out",
                                 str(out), "--quiet"], env=env, capture_output=True, text=True,
                                timeout=60)
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"pid {first.pid}" in lines[0], second.stderr
        assert "m: 4" in (out / "config.yaml").read_text()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()


def test_an_out_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(PacplanError, match=r"cannot use .*file as a run directory"):
        run(_cfg(), tmp_path / "file", progress=False)
