"""Stopping a parallel certify-policy: SIGTERM stops it within seconds even when the user's
policy never returns (its workers are killed after a short grace), the chunks finished before
are kept, and the resume's costs are a one-process run's, byte for byte. Before, a hung policy
under --workers 2 was stopped neither by SIGTERM nor by two Ctrl-C: the driver waited on it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pacplan.policy_certification import certify_policy

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

HANGING = """\
import os
import time

CALLS = [0]


def act(obs):
    CALLS[0] += 1
    if os.environ.get("HANG_AFTER") and CALLS[0] > int(os.environ["HANG_AFTER"]):
        while True:  # never returns
            time.sleep(1)
    return int(obs[2] > 0)
"""


def _command(out: Path, executor: str) -> list[str]:
    return [sys.executable, "-m", "pacplan", "certify-policy", "CartPole-v1", "hanging:act",
            "--n", "60", "--cost", "terminated", "--horizon", "20", "--workers", "2",
            "--executor", executor, "--quiet", "--out", str(out)]


@pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")
@pytest.mark.parametrize("executor", ["processes", pytest.param("ray", marks=pytest.mark.slow)])
def test_sigterm_stops_a_hung_parallel_run_and_the_resume_is_exact(tmp_path: Path,
                                                                   executor: str) -> None:
    """On Ray, SIGTERM to the group also aborted the driver in Ray's own handler (a core-dump
    message, exit 134) and left Ray's processes behind."""
    if executor == "ray":
        pytest.importorskip("ray")
    (tmp_path / "hanging.py").write_text(textwrap.dedent(HANGING))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "HANG_AFTER": "250",
           "RAY_AUTH_MODE": "disabled"}
    out = tmp_path / "out"
    chunks = out / "costs" / "rows.chunks"
    proc = subprocess.Popen(_command(out, executor), cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True, text=True)
    try:  # each worker finishes a chunk of ten 20-step episodes, then hangs in its second
        deadline = time.monotonic() + 180
        while len([p for p in chunks.glob("*") if p.name != "inputs.json"]) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr
            time.sleep(0.2)
        time.sleep(1.0)
        start = time.monotonic()
        os.killpg(proc.pid, signal.SIGTERM)  # the whole group, as a scheduler or timeout does
        _, err = proc.communicate(timeout=60)
        stopped = time.monotonic() - start
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130 and "SIGTERM received" not in err, err
    assert stopped < 30, stopped  # the grace is 5 s; a loaded machine needs some slack
    kept = [p.name for p in chunks.glob("*") if p.name != "inputs.json"]
    assert len(kept) >= 2, kept
    env.pop("HANG_AFTER")
    done = subprocess.run(_command(out, executor), cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        fresh = certify_policy("CartPole-v1", ["hanging:act"], n=60, cost="terminated",
                               horizon=20, out=tmp_path / "fresh")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("hanging", None)
    assert (out / "costs" / "cert.npy").read_bytes() == \
        fresh.certificate_path.parent.joinpath("costs", "cert.npy").read_bytes()
