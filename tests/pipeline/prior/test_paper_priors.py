"""A run certified with the paper's Minitaur prior ships without it: every command that reads
the run names the command that puts it back, and `pacplan data minitaur-prior` puts back exactly
the recorded bytes.

The toy run stands in for the paper's prior (its own prior's sha256 is made "the paper's"), so
the plumbing is tested without the paper's files; the bytes of the real file are tested where
the paper's files are (`pacplan data paper`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import SMALL_TOY_RUN, cli, fails_in_one_line
from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import read_prior_file
from pacplan.io import paperdata
from pacplan.io.files import sha256_file
from pacplan.io.paperdata import paper_data_dir
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.prior import paper_priors
from pacplan.pipeline.provenance import verify_certificate as verify
from pacplan.pipeline.rundir import RunDir


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run") / "toy"
    config = {**SMALL_TOY_RUN, "name": "toy-paper-prior"}
    run(parse_config(json.loads(json.dumps(config))), folder, progress=False)
    return folder


@pytest.fixture
def shipped_without_prior(toy_run: Path, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> tuple[Path, bytes]:
    """A copy of the toy run whose prior is taken for the paper's and removed, as the shipped
    run of the paper's prior is; (the run, the prior's bytes)."""
    import shutil

    run_dir = Path(shutil.copytree(toy_run, tmp_path / "toy"))
    prior = run_dir / RunDir.PRIOR
    data = prior.read_bytes()
    monkeypatch.setattr(paperdata, "MINITAUR_PRIOR_SHA256", sha256_file(prior))
    prior.unlink()
    return run_dir, data


def _writes(data: bytes) -> Callable[..., str]:
    """A stand-in for write_minitaur_prior that writes `data`."""
    def write(out: Path, folder: Path | None = None) -> str:
        out.write_bytes(data)
        return sha256_file(out)
    return write


def test_verify_names_the_command_that_puts_the_papers_prior_back(
        shipped_without_prior: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, data = shipped_without_prior
    cert = run_dir / "certificate.json"
    message = fails_in_one_line(verify, cert, "prior.safetensors is missing",
                                "the paper's published Minitaur prior",
                                "pacplan data paper && pacplan data minitaur-prior")
    assert str(run_dir / RunDir.PRIOR).replace(str(run_dir), "<dir>") in message
    monkeypatch.setattr(paper_priors, "write_minitaur_prior", _writes(data))
    digest, restored = paper_priors.write_minitaur_prior_file(run_dir / RunDir.PRIOR)
    assert restored and digest == paperdata.MINITAUR_PRIOR_SHA256
    assert verify(cert).certified > 0


@pytest.mark.parametrize("command", [["report", "{run}"],
                                     ["export", "{run}", "--out", "{tmp}/planner"],
                                     ["run", "{run}/config.yaml", "--out", "{run}"]])
def test_every_command_names_the_command_that_puts_it_back(
        shipped_without_prior: tuple[Path, bytes], tmp_path: Path, command: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    """Not verify alone: any command that reads the run finds the prior missing and says how to
    put it back, instead of "delete the run directory"."""
    run_dir, _ = shipped_without_prior
    code, _, err = cli([a.format(tmp=tmp_path, run=run_dir) for a in command], capsys)
    flat = " ".join(err.split())
    assert code != 0 and "the paper's published Minitaur prior" in flat, err
    assert "pacplan data minitaur-prior" in flat and "delete the run directory" not in flat


def test_other_bytes_are_never_put_into_the_run(
        shipped_without_prior: tuple[Path, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, data = shipped_without_prior
    monkeypatch.setattr(paper_priors, "write_minitaur_prior", _writes(data + b" "))
    with pytest.raises(PacplanError, match="nothing was put in the run directory"):
        paper_priors.write_minitaur_prior_file(run_dir / RunDir.PRIOR)
    assert not [p for p in run_dir.iterdir() if p.name.endswith(".partial")]
    assert not (run_dir / RunDir.PRIOR).exists()


def test_no_other_file_of_a_run_is_written(shipped_without_prior: tuple[Path, bytes],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    run_dir, data = shipped_without_prior
    monkeypatch.setattr(paper_priors, "write_minitaur_prior", _writes(data))
    with pytest.raises(PacplanError, match="inside the run directory"):
        paper_priors.write_minitaur_prior_file(run_dir / "other.safetensors")
    (run_dir / RunDir.PRIOR).write_bytes(data)  # present: nothing to put back
    with pytest.raises(PacplanError, match="inside the run directory"):
        paper_priors.write_minitaur_prior_file(run_dir / RunDir.PRIOR)


def test_a_prior_recorded_as_another_is_not_the_papers(toy_run: Path, tmp_path: Path) -> None:
    """The toy's own prior missing is the plain message, not the paper's command."""
    import shutil

    run_dir = Path(shutil.copytree(toy_run, tmp_path / "toy"))
    (run_dir / RunDir.PRIOR).unlink()
    message = fails_in_one_line(verify, run_dir / "certificate.json", "missing")
    assert "minitaur-prior" not in message


def test_an_existing_file_is_not_replaced(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "mine.safetensors"
    out.write_bytes(b"the user's")
    code, _, err = cli(["data", "minitaur-prior", str(out)], capsys)
    assert code == 2 and "already exists" in err
    assert out.read_bytes() == b"the user's"


def test_the_papers_prior_file_is_the_recorded_bytes(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The sha256 the shipped run's manifest records is what the command writes from the
    paper's files, and the file says where that prior was trained."""
    if paper_data_dir() is None:
        pytest.skip("the paper's files are not here (`pacplan data paper`)")
    out = tmp_path / "paper.safetensors"
    code, printed, _ = cli(["data", "minitaur-prior", str(out)], capsys)
    assert code == 0 and "written" in printed
    assert sha256_file(out) == paperdata.MINITAUR_PRIOR_SHA256
    prior = read_prior_file(out)
    assert prior.world == paper_priors.MINITAUR_PRIOR_WORLD and prior.mu.size == 944


def test_a_report_names_the_papers_prior_and_how_to_get_it(
        toy_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run given the paper's prior from a file since gone: its report says whose prior it is
    and the command that writes it, not only a path that names nothing in a clone."""
    import shutil

    from pacplan.report.document import write_report

    given = tmp_path / "paper-minitaur.safetensors"
    shutil.copy(toy_run / RunDir.PRIOR, given)
    config = {**SMALL_TOY_RUN, "name": "toy-given-prior"}
    run(parse_config(json.loads(json.dumps(config))), tmp_path / "run", prior_file=given,
        progress=False)
    given.unlink()
    plain = " ".join(write_report(tmp_path / "run").read_text().split())
    assert "The source file is not found with this sha256" in plain
    assert "the paper's published Minitaur prior" not in plain
    monkeypatch.setattr(paperdata, "MINITAUR_PRIOR_SHA256", sha256_file(toy_run / RunDir.PRIOR))
    papers = " ".join(write_report(tmp_path / "run").read_text().split())
    assert ("source the paper's published Minitaur prior (`pacplan data paper && pacplan data "
            "minitaur-prior OUT` writes these bytes; this run read it from "
            "`../paper-minitaur.safetensors`)") in papers
    assert "the paper's published files hold no training record of it" in papers
