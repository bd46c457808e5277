"""The command line as a user meets it: tables, JSON keys, one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pacplan.cli import main

JSON_KEYS = {"mcallester", "quadratic", "klinv", "certified", "emp_cost", "kl", "n", "m", "delta",
             "test_cost"}


def run(args: list[str], capsys) -> tuple[int, str, str]:
    old = sys.argv
    sys.argv = ["pacplan", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


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
    return out


@pytest.mark.parametrize(
    ("case", "extra", "message"),
    [
        ("nan", [], "NaN"),
        ("range", [], "outside \\[0, 1\\]"),
        ("oned", [], "2-D"),
        ("empty", [], "empty"),
        ("pickle", [], "not a plain numeric"),
        ("ok", ["--rows", "11"], "exceeds"),
        ("ok", ["--delta", "0"], "delta"),
        ("ok", ["--delta", "1.2"], "delta"),
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
