"""scripts/install.sh picks the torch build the machine needs: PyTorch's CPU index when there is
no NVIDIA GPU and that index answers, else the pin from the default index, and with a GPU the
default index's build plus one line on getting another CUDA build.

The script is sourced (its `main` runs only when executed), `torch_pip_args` is called with a
PATH that has, or lacks, an `nvidia-smi`, against a local HTTP index or a closed port; nothing is
installed.
"""

from __future__ import annotations

import http.server
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "install.sh"
PIN = "torch==2.13.0"
BASH = shutil.which("bash") or "/bin/bash"

pytestmark = [pytest.mark.skipif(sys.platform != "linux", reason="the CPU-index choice is Linux's"),
              pytest.mark.kernel_free]  # the other-CPU pass (.ci/run) skips it


def _torch_args(bin_dir: Path, index: str) -> tuple[list[str], str]:
    """(pip arguments, what the script said) from a shell whose PATH is only `bin_dir`."""
    proc = subprocess.run(
        [BASH, "-c", f'source "{SCRIPT}" && torch_pip_args'],
        env={"PATH": str(bin_dir), "PYTHON": sys.executable, "PACPLAN_TORCH_CPU_INDEX": index},
        capture_output=True, text=True, timeout=60, check=True)
    return proc.stdout.splitlines(), proc.stderr


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """A PATH folder with `uname` and nothing else (no nvidia-smi, whatever this machine has)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    uname = shutil.which("uname")
    assert uname is not None
    (folder / "uname").symlink_to(uname)
    return folder


@pytest.fixture
def index_url(tmp_path: Path) -> Iterator[str]:
    """A local package index that has a torch page."""
    root = tmp_path / "index"
    (root / "torch").mkdir(parents=True)
    (root / "torch" / "index.html").write_text("<html><body></body></html>\n")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there once the socket is closed


def test_no_gpu_and_a_reachable_cpu_index_gives_the_cpu_build(bin_dir: Path,
                                                               index_url: str) -> None:
    args, said = _torch_args(bin_dir, index_url)
    assert args == ["--extra-index-url", index_url, f"{PIN}+cpu"]
    assert "CPU build" in said and index_url in said


def test_no_gpu_and_no_cpu_index_falls_back_to_the_pin(bin_dir: Path) -> None:
    args, said = _torch_args(bin_dir, _closed_port_url())
    assert args == [PIN]
    assert "not reachable" in said and said.count("\n") == 1


def test_an_empty_index_setting_skips_the_cpu_index(bin_dir: Path) -> None:
    assert _torch_args(bin_dir, "")[0] == [PIN]


def test_a_gpu_gets_the_default_build_and_one_line_on_cuda(bin_dir: Path,
                                                           index_url: str) -> None:
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    args, said = _torch_args(bin_dir, index_url)  # a reachable CPU index is not used
    assert args == [PIN]
    assert said.count("\n") == 1 and "CUDA" in said and "pytorch.org" in said


def test_the_script_is_valid_bash_and_runs_main_only_when_executed() -> None:
    subprocess.run([BASH, "-n", str(SCRIPT)], check=True, timeout=30)
    sourced = subprocess.run([BASH, "-c", f'source "{SCRIPT}"; echo sourced'],
                             capture_output=True, text=True, timeout=30, check=True)
    assert sourced.stdout == "sourced\n"  # no venv made, no pip, no `pacplan --version`
