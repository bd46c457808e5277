"""`pacplan report` prints only what it checked: certificates verified, matrices hash-checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pacbayes.schema import certificate_content_sha256
from pacplan.run.pipeline import run
from pacplan.run.report import write_report

CONFIG = {
    "name": "toy-report",
    "world": {"name": "toy", "options": {"dim": 4, "shift": 0.3}},
    "seeds": {"prior": [0, 100], "cert": [10_000, 10_060], "test": [20_000, 20_050]},
    "es": {"iterations": 3, "envs_per_iter": 4, "pairs_per_env": 2, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 8, "chunk_seeds": 30},
    "policies": {"m": 6, "seed": 3},
    "certificate": {"n": [30, 60], "delta": 0.05},
    "baselines": [{"name": "zeros"}],
    "report": {"trajectories": 0},
}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run") / "toy"
    run(parse_config(json.loads(json.dumps(CONFIG))), folder, progress=False)
    write_report(folder)
    return folder


@pytest.fixture
def rundir(finished_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished_run, tmp_path / "toy"))


def _edit_certificate(path: Path, rehash: bool, **changes: object) -> None:
    data = {**json.loads(path.read_text()), **changes}
    if rehash:
        data.pop("content_sha256")
        data["content_sha256"] = certificate_content_sha256(data)
    path.write_text(json.dumps(data, indent=2))


def _report_fails(rundir: Path, *words: str) -> None:
    before = (rundir / "report.md").read_text()
    with pytest.raises(PacplanError) as info:
        write_report(rundir)
    assert "\n" not in str(info.value)
    for word in words:
        assert word in str(info.value), str(info.value)
    assert (rundir / "report.md").read_text() == before  # nothing unchecked was printed


def test_report_of_an_untouched_run(rundir: Path):
    text = write_report(rundir).read_text()
    assert "| 30 |" in text and "| 60 |" in text and "baseline: zeros" in text


@pytest.mark.parametrize("rehash", [False, True])
def test_report_refuses_an_edited_certificate(rundir: Path, rehash: bool):
    _edit_certificate(rundir / "certificates" / "N60.json", rehash, certified=0.0123)
    _report_fails(rundir, "N60.json", "certified")


def test_report_refuses_a_certificate_under_the_wrong_name(rundir: Path):
    shutil.copy(rundir / "certificates" / "N60.json", rundir / "certificates" / "N30.json")
    _report_fails(rundir, "N30.json", "60")


def test_report_refuses_a_changed_baseline(rundir: Path):
    path = rundir / "costs" / "baseline-zeros.npy"
    costs = np.load(path)
    costs[:] = 0.0
    np.save(path, costs)
    _report_fails(rundir, "baseline-zeros.npy", "changed")


def test_report_refuses_an_unrecorded_baseline(rundir: Path):
    manifest = json.loads((rundir / "manifest.json").read_text())
    del manifest["costs/baseline-zeros.npy"]
    (rundir / "manifest.json").write_text(json.dumps(manifest))
    _report_fails(rundir, "baseline-zeros.npy", "manifest.json")


def test_report_refuses_a_changed_test_matrix(rundir: Path):
    path = rundir / "costs" / "test.npy"
    costs = np.load(path)
    costs[0, 0] = 1.0 - costs[0, 0]
    np.save(path, costs)
    _report_fails(rundir, "test")
