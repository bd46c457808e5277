"""benchmarks/quadruped_student_capacity.py: bad labels are refused in one line (exit 2) before
any work, and a tiny real run on two synthetic label files (no walk) reports every class with a
finite validation regret (the full run is the benchmark's, not a test's)."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from helpers import assert_refused, run_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "quadruped_student_capacity.py"
CLASSES = {"best_constant_gait", "net944_fit", "proprio_mlp64", "conv_proprio_mlp256"}


def _labels(folder: Path, seeds: list[int], rng: np.random.Generator,
            drop: str | None = None) -> None:
    """One synthetic label file (4 states per terrain) in folder/labels-0/<first seed>.npz."""
    k = 4 * len(seeds)
    arrays = {"seed": np.repeat(seeds, 4).astype(np.int64),
              "primitive": np.tile(np.arange(4), len(seeds)).astype(np.int64),
              "depth": rng.random((k, 50, 50), dtype=np.float32),
              "proprio": rng.standard_normal((k, 22)).astype(np.float32),
              "scores": rng.standard_normal((k, 12)),
              "cost": rng.random(len(seeds))}
    if drop is not None:
        del arrays[drop]
    (folder / "labels-0").mkdir(parents=True, exist_ok=True)
    np.savez(folder / "labels-0" / f"{seeds[0]}.npz", **arrays)


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_script(SCRIPT, *args, timeout=timeout)


def test_missing_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    assert_refused(_run("--labels", str(tmp_path / "nowhere"), "--walk", "0"), "nowhere")


def test_folder_without_label_files_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "labels-0").mkdir()
    assert_refused(_run("--labels", str(tmp_path), "--walk", "0"), "no label files")


@pytest.mark.parametrize("key", ["scores", "cost"])
def test_label_file_missing_a_key_is_one_line_and_exit_2(tmp_path: Path, key: str) -> None:
    rng = np.random.default_rng(0)
    _labels(tmp_path, [0, 1, 2, 3], rng)
    _labels(tmp_path, [4, 5, 6, 7], rng, drop=key)
    assert_refused(_run("--labels", str(tmp_path), "--walk", "0"), f"'{key}'")


@pytest.mark.kernel_free  # the script's plumbing
def test_tiny_run_reports_every_class_with_a_finite_regret(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    _labels(tmp_path, [0, 1, 2, 3], rng)
    _labels(tmp_path, [4, 5, 6, 7], rng)
    res = _run("--labels", str(tmp_path), "--walk", "0", "--max-epochs", "2")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1
    out = json.loads(lines[0])
    assert out["split"]["val_from"] == 6 and out["split"]["val_terrains"] == 2
    assert set(out["classes"]) == CLASSES
    for rec in out["classes"].values():
        assert math.isfinite(rec["val"]["regret"]) and rec["val"]["regret"] >= 0
        assert math.isfinite(rec["val"]["regret_se"])
    assert out["classes"]["net944_fit"]["weights"] == 944
    assert out["classes"]["proprio_mlp64"]["weights"] == 6412
    assert "walk" not in out


@pytest.mark.kernel_free  # the script's plumbing
def test_train_terrains_fits_on_the_first_k_and_refuses_fewer_than_2(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    _labels(tmp_path, [0, 1, 2, 3], rng)
    _labels(tmp_path, [4, 5, 6, 7], rng)
    assert_refused(_run("--labels", str(tmp_path), "--walk", "0", "--train-terrains", "1"),
                   "--train-terrains")
    res = _run("--labels", str(tmp_path), "--walk", "0", "--max-epochs", "2",
               "--train-terrains", "3")
    assert res.returncode == 0, res.stderr
    split = json.loads(res.stdout)["split"]
    assert split["train_terrains"] == 3 and split["train_states"] == 12  # terrains 0, 1, 2
    assert split["val_terrains"] == 2
