"""The command line as a user meets it: tables, JSON keys, one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from helpers import cli as run

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

JSON_KEYS = {"mcallester", "quadratic", "klinv", "certified", "emp_cost", "kl", "n", "m", "delta",
             "test_cost"}




def test_certify_matrix_json_and_file(paper_dir: Path, tmp_path: Path, capsys):
    out_file = tmp_path / "certificate.json"
    code, out, _ = run(["certify-matrix", str(paper_dir / "C_quadrotor.npy"), "--test",
                        str(paper_dir / "C_quadrotor_emp_test.npy"), "--rows", "2000", "--bound",
                        "quadratic", "--out", str(out_file), "--json"], capsys)
    assert code == 0
    d = json.loads(out)
    assert d.keys() >= JSON_KEYS
    assert d["quadratic"] <= 0.2299 and d["n"] == 2000 and d["m"] == 50
    saved = json.loads(out_file.read_text())
    assert saved.keys() >= JSON_KEYS and saved["quadratic"] == d["quadratic"]
    code, out, _ = run(["verify", str(out_file)], capsys)
    assert code == 0 and "OK" in out


def test_human_table(paper_dir: Path, capsys):
    code, out, _ = run(["certify-matrix", str(paper_dir / "C_quadrotor.npy")], capsys)
    assert code == 0 and "certified" in out and "21.11 %" in out


def test_bound_command(capsys):
    code, out, _ = run(["bound", "--emp", "0.18", "--kl", "0.2", "-n", "4000", "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["klinv"] < d["quadratic"] < d["mcallester"]
    code, out, _ = run(["bound", "--emp", "0.18", "--kl", "0.2", "-n", "4000"], capsys)
    assert "klinv" in out


def _bad_files(tmp: Path) -> dict[str, Path]:
    files = {}
    nan = np.full((10, 3), 0.2)
    nan[2, 1] = np.nan
    files["nan"] = nan
    files["range"] = np.full((10, 3), 1.5)
    files["oned"] = np.full(10, 0.2)
    files["empty"] = np.zeros((0, 3))
    out = {}
    for name, arr in files.items():
        out[name] = tmp / f"{name}.npy"
        np.save(out[name], arr)
    out["pickle"] = tmp / "pickle.npy"
    np.save(out["pickle"], np.array([{"a": 1}], dtype=object), allow_pickle=True)
    out["zero"] = tmp / "zero.npy"
    out["zero"].write_bytes(b"")
    out["text"] = tmp / "text.npy"
    out["text"].write_text("0.1,0.2\n")
    out["huge"] = tmp / "huge.npy"
    with open(out["huge"], "wb") as fh:  # a header claiming 8 TB, then 80 bytes
        npy_format.write_array_header_1_0(
            fh, {"descr": "<f8", "fortran_order": False, "shape": (10**11, 10)})
        fh.write(b"\0" * 80)
    return out


@pytest.mark.parametrize(
    ("case", "extra", "message"),
    [
        ("nan", [], "NaN"),
        ("range", [], "outside \\[0, 1\\]"),
        ("oned", [], "2-D"),
        ("empty", [], "empty"),
        ("pickle", [], "pickled data is refused"),
        ("zero", [], "zero.npy: not a .npy file \\(it is empty\\)"),
        ("text", [], "text.npy: not a .npy file"),
        ("huge", [], "claims shape \\(100000000000, 10\\)"),
        ("ok", ["--rows", "11"], "exceeds"),
        ("ok", ["--delta", "0"], "--delta must lie in \\(0, 1\\)"),
        ("ok", ["--delta", "1.2"], "--delta must lie in \\(0, 1\\)"),
        ("ok", ["--bound", "tightest"], "unknown bound"),
        ("missing", [], "no such file"),
    ],
)
def test_bad_input_one_line_exit_2(tmp_path: Path, capsys, case, extra, message):
    files = _bad_files(tmp_path)
    files["ok"] = tmp_path / "ok.npy"
    np.save(files["ok"], np.full((10, 3), 0.2))
    files["missing"] = tmp_path / "missing.npy"
    code, _, err = run(["certify-matrix", str(files[case]), *extra], capsys)
    assert code == 2
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1 and "Traceback" not in err, err
    import re

    assert re.search(message, err), err


def test_clip_flag_records(tmp_path: Path, capsys):
    np.save(tmp_path / "c.npy", np.full((10, 3), 1.5))
    code, out, _ = run(["certify-matrix", str(tmp_path / "c.npy"), "--clip", "--json"], capsys)
    d = json.loads(out)
    assert code == 0 and d["clip"] is True and d["cert_matrix"]["clipped"] == 30


def test_console_script_runs(tmp_path: Path):
    """The installed entry point, as a user runs it, fails cleanly on a missing file."""
    proc = subprocess.run([sys.executable, "-m", "pacplan.cli", "certify-matrix",
                           str(tmp_path / "nope.npy")], capture_output=True, text=True)
    assert proc.returncode == 2 and "no such file" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- usage errors: one line, exit 2, whatever click typer bundles --------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bound", "--emp", "0.1", "--kl", "0.1", "-n", "100", "--delta", "abc"], "'--delta'"),
        (["certify-matrix", "x.npy", "--rows", "abc"], "'--rows'"),
        (["bound", "--emp", "0.1", "--kl", "0.1", "-n", "100", "--delta", "2"],
         "--delta must lie in (0, 1)"),
        (["bound", "--emp", "0.1", "--kl", "0.1", "-n", "abc"], "-n"),
        (["verify"], "Missing argument"),
        (["bound", "--bogus"], "--bogus"),
        (["frobnicate"], "frobnicate"),
        (["bound", "--emp"], "--emp"),
        ([], "no command given"),
    ],
)
def test_usage_errors_one_line_exit_2(capsys, args: list[str], message: str):
    code, _, err = run(args, capsys)
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert message in err and err.startswith("error:"), err


@pytest.mark.parametrize("n", ["1e20", "100000000000000000000", "4000.5", "0"])
def test_n_must_be_a_whole_number_in_range(capsys, n: str):
    code, _, err = run(["bound", "--emp", "0.1", "--kl", "0.1", "-n", n], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "whole number from 1 to" in err and "integer ≥ 1" not in err, err


def test_n_accepts_an_exact_whole_number_in_any_spelling(capsys):
    for n in ("4000", "4e3", "4000.0"):
        code, out, err = run(["bound", "--emp", "0.1", "--kl", "0.1", "-n", n, "--json"], capsys)
        assert code == 0 and json.loads(out)["n"] == 4000, err


def test_console_script_usage_error_has_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "pacplan.cli", "bound", "--emp", "x"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# -- OS errors: one line naming the path and the OS's reason, exit 2 ----------------------------
@pytest.fixture
def make_read_only(monkeypatch: pytest.MonkeyPatch):
    """Make a folder tree read-only (restored after the test).

    Root ignores permission bits, so as root pacplan's own writes (`pacplan.io.files`) into the
    folder are refused with the EACCES a user would get.
    """
    import builtins
    import errno
    import os

    import pacplan.io.files

    folders: list[Path] = []
    real_open = builtins.open

    def guarded_open(file, mode="r", *args, **kwargs):
        target = Path(file).resolve()
        if any(c in mode for c in "wax+") and any(target.is_relative_to(f) for f in folders):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(file))
        return real_open(file, mode, *args, **kwargs)

    def make(folder: Path) -> Path:
        folder.mkdir(parents=True, exist_ok=True)
        tree = [folder, *(p for p in folder.rglob("*") if p.is_dir())]
        for d in sorted(tree, reverse=True):
            d.chmod(0o555)
        folders.append(folder.resolve())
        if os.geteuid() == 0:
            monkeypatch.setattr(pacplan.io.files, "open", guarded_open, raising=False)
        return folder

    yield make
    for folder in folders:
        for d in [folder, *(p for p in folder.rglob("*") if p.is_dir())]:
            d.chmod(0o755)


@pytest.fixture
def read_only_dir(tmp_path: Path, make_read_only) -> Path:
    return make_read_only(tmp_path / "ro")


def _assert_os_error(code: int, err: str, path: Path, reason: str) -> None:
    lines = [line for line in err.strip().splitlines() if line]
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert str(path) in err.replace("\n", "") and reason in err, err


def _toy_config(tmp_path: Path, **changes) -> Path:
    import yaml

    data = {"name": "tiny", "world": {"name": "toy", "options": {"dim": 3}},
            "seeds": {"prior": [0, 50], "cert": [100, 140], "test": [200, 220]},
            "es": {"iterations": 2, "envs_per_iter": 2, "pairs_per_env": 2},
            "policies": {"m": 3}, "report": {"trajectories": 0}} | changes
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_certify_matrix_out_in_read_only_dir(tmp_path: Path, read_only_dir: Path, capsys):
    ok = tmp_path / "ok.npy"
    np.save(ok, np.full((10, 3), 0.2))
    out = read_only_dir / "cert.json"
    code, _, err = run(["certify-matrix", str(ok), "--out", str(out)], capsys)
    _assert_os_error(code, err, out, "Permission denied")
    assert list(read_only_dir.iterdir()) == []


def test_certify_matrix_out_naming_a_file_or_a_folder(tmp_path: Path, capsys):
    ok = tmp_path / "ok.npy"
    np.save(ok, np.full((10, 3), 0.2))
    code, _, err = run(["certify-matrix", str(ok), "--out", str(ok / "cert.json")], capsys)
    _assert_os_error(code, err, ok, "is not a folder")  # its folder cannot be made: a file
    code, _, err = run(["certify-matrix", str(ok), "--out", str(tmp_path)], capsys)
    _assert_os_error(code, err, tmp_path, "is a folder: give a file path")


def test_disk_full_is_one_line_naming_the_file(tmp_path: Path, capsys,
                                               monkeypatch: pytest.MonkeyPatch):
    import errno
    import os

    def no_space(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    ok = tmp_path / "ok.npy"
    np.save(ok, np.full((10, 3), 0.2))
    monkeypatch.setattr(os, "fsync", no_space)
    code, _, err = run(["certify-matrix", str(ok), "--out", str(tmp_path / "c.json")], capsys)
    _assert_os_error(code, err, tmp_path / "c.json", "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.npy"]  # no temporary file left


def test_run_and_train_prior_with_out_naming_a_file(tmp_path: Path, capsys):
    cfg = _toy_config(tmp_path)
    taken = tmp_path / "taken"
    taken.write_text("not a folder")
    for command in ("run", "train-prior"):
        code, _, err = run([command, str(cfg), "--out", str(taken), "--quiet"], capsys)
        _assert_os_error(code, err, taken, "is a file, not a folder")


def test_run_and_train_prior_into_read_only_dir(tmp_path: Path, read_only_dir: Path, capsys):
    cfg = _toy_config(tmp_path)
    for command in ("run", "train-prior"):
        code, _, err = run([command, str(cfg), "--out", str(read_only_dir / command), "--quiet"],
                           capsys)
        _assert_os_error(code, err, read_only_dir, "Permission denied")


def test_report_into_read_only_run_dir(tmp_path: Path, capsys, make_read_only):
    cfg = _toy_config(tmp_path)
    run_dir = tmp_path / "ro" / "run"
    code, _, err = run(["run", str(cfg), "--out", str(run_dir), "--quiet"], capsys)
    assert code == 0, err
    (run_dir / "report.md").unlink()
    make_read_only(tmp_path / "ro")
    code, _, err = run(["report", str(run_dir)], capsys)
    _assert_os_error(code, err, run_dir, "Permission denied")


def _fake_render(seed: int, out: str, theta_path: str | None,
                 world_options: dict | None = None) -> str:
    """A renderer (the registry's signature) that writes its PNG the way pacplan writes every
    file."""
    from pacplan.io.files import atomic_write_bytes

    atomic_write_bytes(out, b"\x89PNG fake")
    return out


def test_render_into_read_only_dir(read_only_dir: Path, capsys, monkeypatch):
    from pacplan.worlds import base

    entry = base.WorldEntry("pacplan.worlds.toy:ToyWorld", renderer=f"{__name__}:_fake_render")
    monkeypatch.setitem(base._REGISTRY, "painted", entry)
    out = read_only_dir / "r.png"
    code, _, err = run(["render", "painted", "--seed", "1", "--out", str(out)], capsys)
    _assert_os_error(code, err, out, "Permission denied")


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"world": {"name": "toy", "options": {"dim": "eight"}}}, "option 'dim' must be int"),
        ({"world": {"name": "toy", "options": {"dimm": 3}}}, "unknown option 'dimm'"),
        ({"baselines": [{"name": "b", "world_options": {"shift": "x"}}]}, "option 'shift'"),
    ],
)
def test_bad_world_options_fail_before_any_work(tmp_path: Path, capsys, changes, fragment):
    cfg = _toy_config(tmp_path, **changes)
    for command in ("run", "train-prior"):
        out = tmp_path / command
        code, _, err = run([command, str(cfg), "--out", str(out), "--quiet"], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "world 'toy'" in err and fragment in err, err
        assert not out.exists()


# -- presets, --version, choices and completion ---------------------------------------------------
def test_version(capsys):
    from pacplan import __version__

    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.strip() == f"pacplan {__version__}"


def test_presets_lists_every_preset_with_its_description(capsys):
    from pacplan.presets import list_presets

    code, out, _ = run(["presets"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    for p in list_presets():
        assert p.name in out and " ".join(p.description.split()[:4]) in flat, p.name
    # the shipped priors, for --prior NAME
    assert ("quadruped, quadruped-es, quadruped-paper-code, quadruped-paper-code-twin, uav, "
            "uav-es, uav-paper-net") in flat


def test_presets_name_prints_its_file(capsys):
    from pacplan.presets import preset_path

    code, out, _ = run(["presets", "uav-quick"], capsys)
    assert code == 0 and out.strip() == str(preset_path("uav-quick"))
    code, _, err = run(["presets", "nosuch"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "unknown preset" in err, err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "nosuch"], "no config file or preset named 'nosuch'; presets: "),
        (["train-prior", "nosuch", "--out", "x"], "no config file or preset named 'nosuch'"),
        (["run", "configs/toy.yaml"], "the shipped preset of that name runs with `pacplan run"),
        (["run", "toy", "--prior", "nope"],
         "shipped priors: quadruped, quadruped-es, quadruped-paper-code, "
         "quadruped-paper-code-twin, uav"),
        (["run", "toy", "--prior", "nope.safetensors"], "prior file not found: nope.safetensors"),
    ],
)
def test_unknown_config_or_prior_fails_before_any_work(tmp_path: Path, monkeypatch, capsys,
                                                       args: list[str], message: str):
    monkeypatch.chdir(tmp_path)
    code, _, err = run(args, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert message in " ".join(err.split()), err
    assert list(tmp_path.iterdir()) == []  # no run directory was made


def _cli(args: list[str], **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "pacplan.cli", *args], capture_output=True,
                          text=True, env={**os.environ, "COLUMNS": "200",
                                          "TERMINAL_WIDTH": "200", **env})


def test_help_shows_choices_as_choices_and_flags_as_flags():
    import re

    out = _cli(["run", "--help"]).stdout
    assert re.search(r"--executor\s+\[serial\|processes\|ray\]", out), out
    assert re.search(r"--quiet\s+No progress bars", out), out  # no value shown after a flag
    assert re.search(r"--help\s+Show this message", out), out
    out = _cli(["certify-matrix", "--help"]).stdout
    assert "[mcallester|quadratic|klinv|best]" in out and "[gibbs|rep]" in out, out
    assert re.search(r"--clip\s+Clip costs", out), out
    out = _cli(["--help"]).stdout
    assert "--version" in out and "--install-completion" in out, out


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("pacplan run uav", {"uav-quick", "uav-paper", "uav-tight", "uav-prior", "uav-es-prior",
                             "uav-paper-prior", "uav-paper-net-prior"}),
        ("pacplan train-prior quadruped-p", {"quadruped-paper", "quadruped-paper-bullet",
                                             "quadruped-paper-code", "quadruped-paper-n1000",
                                             "quadruped-paper-n2000", "quadruped-prior",
                                             "quadruped-paper-code-prior",
                                             "quadruped-paper-code-bullet-prior",
                                             "quadruped-paper-code-twin-prior",
                                             "quadruped-paper-code-n1000"}),
        ("pacplan train-prior quadruped-e", {"quadruped-es-prior"}),
        ("pacplan run toy --executor p", {"processes"}),
        ("pacplan run toy --prior ", {"uav", "uav-es", "uav-paper-net", "quadruped", "quadruped-es",
                                      "quadruped-paper-code", "quadruped-paper-code-twin"}),
        ("pacplan certify-matrix c.npy --bound q", {"quadratic"}),
    ],
)
def test_shell_completion_offers_presets_and_choices(words: str, expected: set[str]):
    proc = _cli([], _PACPLAN_COMPLETE="complete_bash", COMP_WORDS=words,
                COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    assert proc.returncode == 0, proc.stderr
    assert set(proc.stdout.split()) == expected, proc.stdout
