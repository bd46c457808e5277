"""A shipped run leaves policies.npy out (the convnet's draws were 25 MB a run): every command
that needs them draws them again from the run's checked prior and recorded seed, and uses them
only if their sha256 is the one the run recorded when it drew them first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import cli
from pacplan.errors import PacplanError
from pacplan.io.files import sha256_file
from pacplan.pipeline.rundir import Manifest, RunDir, checked_policies

RESULTS = Path(__file__).resolve().parents[2] / "results"


def _without_draws(tmp_path: Path, name: str) -> Path:
    run = Path(shutil.copytree(RESULTS / name, tmp_path / name))
    (run / RunDir.POLICIES).unlink(missing_ok=True)
    return run


@pytest.mark.parametrize("name", ["uav-es", "quadruped", "gym-cartpole"])
def test_verify_draws_them_again_with_the_recorded_sha256(
        tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    run = _without_draws(tmp_path, name)
    recorded = json.loads((run / RunDir.MANIFEST).read_text())[RunDir.POLICIES]["sha256"]
    code, out, err = cli(["verify", str(run / RunDir.CERTIFICATE)], capsys)
    assert code == 0 and out.startswith("OK"), err
    assert sha256_file(run / RunDir.POLICIES) == recorded  # drawn when the run was made


def test_export_and_the_python_helper_use_the_redrawn_policies(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _without_draws(tmp_path, "gym-cartpole")
    assert checked_policies(run).shape[0] == json.loads(
        (run / RunDir.MANIFEST).read_text())[RunDir.POLICIES]["inputs"]["m"]
    (run / RunDir.POLICIES).unlink()
    assert cli(["export", str(run), "--out", str(tmp_path / "planner")], capsys)[0] == 0
    assert cli(["verify", str(tmp_path / "planner")], capsys)[0] == 0


def test_draws_that_do_not_match_their_record_are_refused(tmp_path: Path) -> None:
    """A manifest whose recorded seed is not the one the draws came from: never used."""
    run = _without_draws(tmp_path, "gym-cartpole")
    manifest = json.loads((run / RunDir.MANIFEST).read_text())
    manifest[RunDir.POLICIES]["inputs"]["seed"] += 1
    (run / RunDir.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(PacplanError, match=r"policies\.npy is missing, and drawn again from "
                                           r"prior\.safetensors \(m = \d+, seed \d+\) its "
                                           r"sha256 is not the recorded"):
        Manifest(run).check(RunDir.POLICIES)
    assert not (run / RunDir.POLICIES).exists()


def test_without_the_prior_the_missing_file_is_named(tmp_path: Path) -> None:
    run = _without_draws(tmp_path, "gym-cartpole")
    (run / RunDir.PRIOR).unlink()
    with pytest.raises(PacplanError, match=r"prior\.safetensors is recorded in manifest\.json "
                                           "but missing"):
        Manifest(run).check(RunDir.POLICIES)
