"""An output in a read-only location is one line naming it (exit 2 on the command line, a
`PacplanError` in Python), never a traceback, and nothing is left half-made.

Tests run as root here and in CI, and root ignores permission bits (chmod 555 stops nobody),
while dropping privileges needs a Python every user can run. So the location is under /sys,
which the kernel keeps read-only for every user, root included: making a folder or a file there
fails (EACCES or EPERM; EROFS in a container). Skipped where /sys is missing or writable.
test_cli.py emulates a chmod-ed folder for root; this is the real thing.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

import pacplan
from helpers import SMALL_TOY_RUN, cli
from pacplan.errors import PacplanError

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

SYS = Path("/sys")


@pytest.fixture(scope="module")
def read_only() -> Path:
    """/sys, after checking that this process cannot make anything in it."""
    probe = SYS / f"pacplan-probe-{os.getpid()}"
    if not SYS.is_dir():
        pytest.skip("no /sys here (not Linux)")
    try:
        probe.mkdir()
    except OSError:
        return SYS
    probe.rmdir()
    pytest.skip("/sys is writable here")


def _outs(read_only: Path, name: str) -> list[Path]:
    """A path directly in the read-only folder, and one in a folder that cannot be made."""
    return [read_only / f"pacplan-{name}", read_only / "pacplan-no-folder" / name]


def _one_line(code: int, err: str, out: Path) -> None:
    assert code == 2 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and str(out) in err, err


def test_certify_matrix_out_in_a_read_only_folder(read_only: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "c.npy", np.random.default_rng(0).random((30, 3)))
    for out in _outs(read_only, "cert.json"):
        code, stdout, err = cli(["certify-matrix", str(tmp_path / "c.npy"), "--out", str(out)],
                                capsys)
        _one_line(code, err, out)
        assert "cannot" in err and stdout == "" and not out.exists()


def test_run_and_train_prior_out_in_a_read_only_folder(read_only: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(SMALL_TOY_RUN))
    for command in ("run", "train-prior"):
        for out in _outs(read_only, command):
            code, _, err = cli([command, str(config), "--out", str(out), "--quiet"], capsys)
            _one_line(code, err, out)
            assert f"cannot use {out} as a run directory" in err and not out.exists()


def test_python_outputs_in_a_read_only_folder(read_only: Path, tmp_path: Path) -> None:
    """`Certificate.save` let the OSError out (a traceback naming a temporary file)."""
    np.save(tmp_path / "c.npy", np.random.default_rng(0).random((30, 3)))
    cert = pacplan.certify(tmp_path / "c.npy")
    for out in _outs(read_only, "cert.json"):
        with pytest.raises(PacplanError) as info:
            cert.save(out)
        message = str(info.value)
        assert message.startswith(f"{out}: cannot ") and "\n" not in message, message
        assert not out.exists()
    for out in _outs(read_only, "run"):
        with pytest.raises(PacplanError, match=f"cannot use {out} as a run directory"):
            pacplan.run(SMALL_TOY_RUN, out, progress=False)
