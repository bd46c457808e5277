"""A Ray address that does not answer is a one-line error in seconds, never a hang.

`ray.init(address=...)` retries a dead address for many minutes; `RayExecutor` checks the
address first (TCP, then Ray's GCS handshake under a time limit).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pacplan.errors import PacplanError
from pacplan.pipeline.execution import ray_executor as parallel

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

pytest.importorskip("ray")


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts TCP connections (backlog) but never says a word."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen(8)
        yield s.getsockname()[1]


def test_closed_port_is_an_error_at_once() -> None:
    port = _closed_port()
    start = time.monotonic()
    with pytest.raises(PacplanError, match=rf"could not connect to the Ray cluster at "
                                           rf"127\.0\.0\.1:{port}: .*{port}: Connection refused"):
        parallel.RayExecutor(address=f"127.0.0.1:{port}", chunk_policies=1, chunk_seeds=1)
    assert time.monotonic() - start < 10


def test_ray_client_address_with_closed_port() -> None:
    port = _closed_port()
    with pytest.raises(PacplanError, match="Connection refused"):
        parallel.check_ray_address(f"ray://127.0.0.1:{port}")


def test_a_silent_server_is_an_error_after_the_time_limit(silent_port: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parallel, "RAY_CONNECT_TIMEOUT_S", 2.0)
    start = time.monotonic()
    with pytest.raises(PacplanError, match=r"accepts connections but no Ray cluster answered "
                                           r"within 2 s"):
        parallel.RayExecutor(address=f"127.0.0.1:{silent_port}", chunk_policies=1,
                             chunk_seeds=1)
    assert 1.5 < time.monotonic() - start < 10
    import ray

    assert not ray.is_initialized()  # ray.init was never called


def test_cli_closed_port_one_line_exit_2(tmp_path: Path) -> None:
    """As a user meets it: `pacplan run toy --address …` exits 2 with one line, no traceback."""
    port = _closed_port()
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pacplan.cli", "run", "toy", "--address",
                           f"127.0.0.1:{port}", "--out", str(tmp_path / "run"), "--quiet"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Connection refused" in lines[0], proc.stderr
    assert time.monotonic() - start < 30


@pytest.mark.slow
def test_a_live_cluster_passes_the_check(tmp_path: Path) -> None:
    """A real Ray instance (started by another process) answers the check and is connected to."""
    head = subprocess.Popen(
        [sys.executable, "-c", "import sys, ray; ray.init(num_cpus=1, include_dashboard=False, "
         "log_to_driver=False); print(ray.get_runtime_context().gcs_address, flush=True); "
         "sys.stdin.read(); ray.shutdown()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    try:
        assert head.stdout is not None
        address = head.stdout.readline().strip()
        assert address, "the Ray head did not start"
        probe = ("import sys; from pacplan.pipeline.execution.ray_executor import RayExecutor; "
                 "ex = RayExecutor(address=sys.argv[1], chunk_policies=1, chunk_seeds=1); "
                 "print(ex.workers); ex.close()")
        proc = subprocess.run([sys.executable, "-c", probe, address], capture_output=True,
                              text=True, timeout=120,
                              env={**os.environ, "RAY_AUTH_MODE": "disabled"})
        assert proc.returncode == 0 and proc.stdout.strip() == "1", proc.stderr
    finally:
        head.communicate(input="", timeout=60)
