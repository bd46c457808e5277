"""User code that calls `os._exit` cannot end pacplan with exit 0 and no certificate: in this
process it is one error naming the policy (or module), exit 2; a process the user's code forks
keeps the real `os._exit`. The command runs in a subprocess, as a user runs it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pacplan.errors import PacplanError
from pacplan.io.user_code import calling_user_code

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


def _pacplan(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    script = Path(sys.executable).with_name("pacplan")
    return subprocess.run([str(script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.parametrize("where", ["act", "import"])
def test_os_exit_in_a_policy_is_an_error_not_exit_0(tmp_path: Path, where: str) -> None:
    body = ("import os\n\n\ndef act(obs):\n    os._exit(0)\n" if where == "act" else
            "import os\nos._exit(0)\n\n\ndef act(obs):\n    return 0\n")
    (tmp_path / "quitter.py").write_text(body)
    done = _pacplan(["certify-policy", "CartPole-v1", "quitter:act", "--return-bounds",
                     "0,500", "--n", "10", "--out", "runs/q", "--quiet"], tmp_path)
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "os._exit(0)" in done.stderr and "no certificate" in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_forked_child_of_user_code_exits_for_real() -> None:
    """The guard is this process's: a child the user's code forks exits as it asks."""
    with calling_user_code("policy x"):
        pid = os.fork()
        if pid == 0:
            os._exit(7)
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 7
    with pytest.raises(PacplanError, match=r"policy x \(it called os\._exit\(3\)"), \
            calling_user_code("policy x"):
        os._exit(3)
    assert os._exit.__name__ == "_exit"  # the real one is back


def test_user_code_keeps_its_own_except_exception(tmp_path: Path) -> None:
    """`ExitCalled` is a SystemExit: a policy's `except Exception` does not swallow it."""
    def sneaky() -> None:
        with contextlib.suppress(Exception):  # what a careless policy does
            os._exit(0)

    with pytest.raises(PacplanError, match=r"os\._exit"), calling_user_code("policy y"):
        sneaky()
