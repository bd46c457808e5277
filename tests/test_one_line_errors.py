"""Bad inputs that used to end in a traceback are one line with exit 2 (issue 25): deeply
nested JSON or YAML, a JSON list where an object is expected, symlink loops in paths."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import cli
from verify_helpers import read, small_certificate, write

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[1]
DEEP_JSON = "[" * 100_000 + "]" * 100_000


def _one_line(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err


def test_a_matrix_path_that_is_a_symlink_loop(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    cert = small_certificate(tmp_path)
    (tmp_path / "loop.npy").symlink_to(tmp_path / "loop.npy")
    record = read(cert)
    record["cert_matrix"]["path"] = "loop.npy"
    write(cert, record, rehash=True)
    code, _, err = cli(["verify", str(cert)], capsys)
    _one_line(code, err)
    code, _, err = cli(["certify-matrix", str(tmp_path / "loop.npy")], capsys)
    _one_line(code, err)


def test_a_certificate_that_is_a_symlink_loop(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "c.json").symlink_to(tmp_path / "c.json")
    code, _, err = cli(["verify", str(tmp_path / "c.json")], capsys)
    _one_line(code, err)


@pytest.mark.parametrize("text", ["[]", "[1, 2]", '"x"', DEEP_JSON])
def test_a_certificate_that_is_not_an_object(tmp_path: Path, text: str, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "c.json").write_text(text)
    code, _, err = cli(["verify", str(tmp_path / "c.json")], capsys)
    _one_line(code, err)


@pytest.mark.parametrize("text", ["[]", DEEP_JSON, '{"prior.safetensors": []}'])
def test_a_run_manifest_that_is_not_an_object_of_entries(tmp_path: Path, text: str,
                                                         capsys) -> None:  # type: ignore[no-untyped-def]
    run = Path(shutil.copytree(REPO / "results" / "gym-cartpole", tmp_path / "run",
                               ignore=shutil.ignore_patterns("figures", "report*")))
    (run / "manifest.json").write_text(text)
    for command in (["verify", str(run / "certificate.json")], ["report", str(run)]):
        code, _, err = cli(command, capsys)
        _one_line(code, err)


@pytest.mark.parametrize("text", ["a:\n" + "".join("  " * i + "- \n" for i in range(1, 3000)),
                                  "[" * 100_000, "\x00name: x\n", "- 1\n- 2\n"])
def test_a_config_that_is_not_a_mapping_or_nested_too_deep(tmp_path: Path, text: str,
                                                           capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "c.yaml").write_text(text)
    code, _, err = cli(["run", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "r")], capsys)
    _one_line(code, err)
    assert not (tmp_path / "r").exists()


def test_timings_nested_too_deep_are_replaced(tmp_path: Path) -> None:
    from pacplan.pipeline.rundir import read_timings

    (tmp_path / "timings.json").write_text(DEEP_JSON)
    history, problem = read_timings(tmp_path / "timings.json")
    assert history == [] and problem is not None and "Recursion" in problem
    json.dumps(problem)


def test_pacplan_warnings_print_as_one_line_others_as_python_prints_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI and its workers print pacplan's warnings as `warning: …`, one line without
    pacplan's file and source line; a library's warning keeps Python's format."""
    import warnings

    from pacplan.errors import SensorFaultWarning, one_line_warnings

    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)
    one_line_warnings()
    one_line_warnings()  # a second call (a worker in the CLI's process) changes nothing
    text = warnings.formatwarning("terrain 3: not finite", SensorFaultWarning, "w.py", 9, "x")
    assert text == "warning: terrain 3: not finite\n"
    other = warnings.formatwarning("old API", DeprecationWarning, "lib.py", 7, "call()")
    assert other.startswith("lib.py:7: DeprecationWarning: old API")
