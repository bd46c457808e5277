"""Temporary files of killed atomic writes (`.NAME.tmpPID`) are removed by the next run of the
directory; nothing else is, and a write still in progress keeps its file."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from helpers import SMALL_TOY_RUN, StopAfter
from pacplan.config import parse_config
from pacplan.io.files import remove_stale_temps, temp_path, temp_writer
from pacplan.pipeline.pipeline import run

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

_KILLED_WRITE = """
import os, signal, sys
from pathlib import Path
import pacplan.io.files as files
def die(*_):  # killed between writing the temporary file and renaming it
    os.kill(os.getpid(), signal.SIGKILL)
files.os.replace = die
files.atomic_write_bytes(Path(sys.argv[1]), b"half of a file")
"""


def _killed_write(target: Path) -> Path:
    """Write `target` atomically in a process killed before the rename: the litter it leaves."""
    writer = subprocess.Popen([sys.executable, "-c", _KILLED_WRITE, str(target)],
                              stderr=subprocess.PIPE, text=True)
    _, err = writer.communicate()
    assert writer.returncode == -9, err
    (litter,) = target.parent.glob(f".{target.name}.tmp*")
    assert temp_writer(litter.name) == writer.pid
    return litter


def _dead_writer_temp(target: Path) -> Path:
    """The temporary name a writer with PID 99999999 (no such process) gives `target`."""
    with mock.patch("os.getpid", return_value=99_999_999):
        path = temp_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"left by a killed write")
    return path


def _tree(root: Path) -> dict[str, str]:
    """Every entry under `root` (not following symlinks): file sha256, link target or dir."""
    out = {}
    for parent, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(parent) / name
            rel = str(p.relative_to(root))
            out[rel] = (f"-> {os.readlink(p)}" if p.is_symlink() else "dir" if p.is_dir()
                        else hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def test_a_resumed_run_removes_the_litter_of_killed_writes_and_keeps_a_live_writers(
        tmp_path: Path) -> None:
    cfg = parse_config({**SMALL_TOY_RUN, "executor": {"kind": "serial", "chunk_policies": 4,
                                                      "chunk_seeds": 20}})
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out, progress=False, executor=StopAfter(3, chunk_policies=4, chunk_seeds=20))
    litter = [_killed_write(out / "costs" / "cert.npy"),
              _killed_write(out / "costs" / "cert.chunks" / "s0_t0.npy"),
              _dead_writer_temp(out / "certificate.json")]
    assert litter[2].name == ".certificate.json.tmp99999999"
    live = temp_path(out / "crossval" / "bullet.json")  # this process: a write in progress
    live.parent.mkdir()
    live.write_bytes(b"being written")
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with mock.patch("os.getpid", return_value=sleeper.pid):
            other = temp_path(out / "crossval" / "mujoco.json")  # another live process's
        other.write_bytes(b"being written elsewhere")
        said: list[str] = []
        run(cfg, out, progress=False, log=said.append)
        assert not any(p.exists() for p in litter)
        assert live.read_bytes() == b"being written"
        assert other.read_bytes() == b"being written elsewhere"
    finally:
        sleeper.kill()
        sleeper.wait()
    (line,) = [s for s in said if s.startswith("removed ")]
    assert line.startswith("removed 3 temporary files left by killed writes (")
    assert "certificate.json.tmp99999999" in line


def test_only_files_named_as_the_writer_names_them_are_removed(tmp_path: Path) -> None:
    """Look-alikes, a folder, a symlink (and its target) and everything else stay byte for
    byte; only the dead writers' regular files go."""
    root = tmp_path / "run"
    (root / "costs").mkdir(parents=True)
    gone = [_dead_writer_temp(root / "costs" / "cert.npy"), _dead_writer_temp(root / "a b.json")]
    keep = {"cert.npy": b"data", ".cert.npy.tmp": b"no pid", "cert.npy.tmp99999999": b"no dot",
            ".cert.npy.tmp099999999": b"leading zero", ".cert.npy.tmp99999999x": b"suffix",
            ".tmp99999999": b"no name", "costs/.x.tmp12345678901": b"11 digits"}
    for name, data in keep.items():
        (root / name).write_bytes(data)
    (root / ".folder.tmp99999999").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not the run's")
    (root / ".link.tmp99999999").symlink_to(outside)
    before = {k: v for k, v in _tree(root).items() if root / k not in gone}
    assert sorted(remove_stale_temps(root)) == sorted(gone)
    assert _tree(root) == before
    assert outside.read_bytes() == b"not the run's"
