"""A run's config.yaml is evidence shipped beside its certificate, so `verify` checks it
(issue 25, class 2): an edit that makes the prior's seeds overlap the certification seeds, or
that names another world or other seeds, is refused in the run directory and in a planner."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from helpers import cli, rehash_planner
from pacplan.errors import PacplanError
from pacplan.export import export_planner
from pacplan.pipeline.provenance import verify_certificate

REPO = Path(__file__).resolve().parents[2]


def _edit_config(run: Path, edit) -> None:  # type: ignore[no-untyped-def]
    data = yaml.safe_load((run / "config.yaml").read_text())
    edit(data)
    (run / "config.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def _overlap(data: dict) -> None:
    data["seeds"]["prior"] = [data["seeds"]["cert"][0], data["seeds"]["cert"][0] + 10]


@pytest.fixture
def rundir(tmp_path: Path) -> Path:
    return Path(shutil.copytree(REPO / "results" / "gym-cartpole", tmp_path / "run",
                                ignore=shutil.ignore_patterns("figures", "report*")))


@pytest.mark.parametrize("edit, words", [
    (_overlap, "overlap"),
    (lambda d: d["world"]["options"].update(horizon=100), "provenance.world"),
    (lambda d: d["seeds"].update(test=[300000, 301000]), "seeds.test"),
    (lambda d: d["seeds"].update(cert=[100001, 101001]), "seeds.cert"),
    (lambda d: d["policies"].update(seed=d["policies"]["seed"] + 1), "policies"),
    (lambda d: d["policies"].update(m=d["policies"]["m"] + 1), "policies"),
    (lambda d: d["certificate"].update(delta=0.5), "certificate.delta"),
], ids=["prior-overlaps-cert", "world", "test-seeds", "cert-seeds", "policies-seed",
        "policies-m", "delta"])
def test_an_edited_config_is_refused(rundir: Path, edit, words: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert verify_certificate(rundir / "certificate.json")
    _edit_config(rundir, edit)
    with pytest.raises(PacplanError, match=words):
        verify_certificate(rundir / "certificate.json")
    code, _, err = cli(["verify", str(rundir / "certificate.json")], capsys)
    assert code == 2 and "config.yaml" in err


def test_a_missing_config_is_refused(rundir: Path) -> None:
    (rundir / "config.yaml").unlink()
    with pytest.raises(PacplanError, match=r"config\.yaml"):
        verify_certificate(rundir / "certificate.json")


def test_a_planner_with_an_edited_config_is_refused(tmp_path: Path,
                                                    capsys) -> None:  # type: ignore[no-untyped-def]
    planner = export_planner(REPO / "results" / "uav", tmp_path / "planner")
    _edit_config(planner / "run", _overlap)
    rehash_planner(planner)  # the adversary re-hashes the planner's manifest
    code, _, err = cli(["verify", str(planner)], capsys)
    assert code == 2 and "config.yaml" in err and "overlap" in err
