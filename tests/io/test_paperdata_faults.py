"""`pacplan data paper` against a server that trickles bytes gives up within --timeout; SIGTERM
and Ctrl-C leave no .part file, and say what is kept (issue 25)."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pacplan.errors import PacplanError
from pacplan.io.paperdata import PAPER_FILES, fetch_paper_data

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


class _Trickle(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(PAPER_FILES[0].size))
        self.end_headers()
        try:
            for _ in range(600):  # a byte every 0.1 s: never silent for a whole timeout
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(0.1)
        except OSError:
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def trickle() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/Weights/"
    server.shutdown()


def test_a_trickling_server_fails_within_the_timeout(trickle: str, tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(PacplanError, match="trickles") as info:
        fetch_paper_data(trickle, tmp_path, timeout=0.5)
    assert time.monotonic() - start < 3 and "\n" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def _default_sigint() -> None:
    """A suite started in the background by a shell inherits SIGINT ignored, and Python then
    installs no KeyboardInterrupt handler in the child: give the child the default back."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_download(url: str, cache: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "pacplan.cli", "data", "paper", "--url", url,
                             "--cache", str(cache), "--timeout", "30"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    deadline = time.monotonic() + 30
    while not list(cache.glob("*.part")):
        assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return proc


@pytest.mark.parametrize("signum, code, words", [
    (signal.SIGTERM, 128 + signal.SIGTERM, "terminated"),
    (signal.SIGINT, 130, "interrupted"),
])
def test_a_signal_leaves_no_part_file(trickle: str, tmp_path: Path, signum: int, code: int,
                                      words: str) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    proc = _start_download(trickle, cache)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code, err
    assert list(cache.iterdir()) == []
    assert words in err and "run directory" not in err and "Traceback" not in err
