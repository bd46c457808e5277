"""Shared fixtures: the paper's published UAV cost matrices (real data, used as an oracle)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

from pacplan.io.paperdata import default_cache_dir, paper_data_dir

# Property tests draw the same examples on every run, so a green suite stays green on the next
# machine; HYPOTHESIS_PROFILE=explore draws new ones each run (to hunt, not to gate).
settings.register_profile("pacplan", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "pacplan"))

if os.environ.get("PACPLAN_TEST_OTHER_LIBM") == "1":  # scripts/test-as-another-cpu.sh
    import other_libm

    other_libm.install()


@pytest.fixture(scope="session", autouse=True)
def shipped_results_whole() -> None:
    """The shipped results leave out what pacplan draws again or fetches: policies.npy (drawn
    from the prior and the recorded seed, hash-checked) and, in the runs of the paper's own
    prior, its Minitaur weights (`pacplan data minitaur-prior`, from the paper's files when
    they are here). Put back once a session, as a user's first command would, so tests may
    read them as files."""
    from pacplan.errors import PacplanError
    from pacplan.io.paperdata import MINITAUR_PRIOR_SHA256
    from pacplan.pipeline.prior.paper_priors import write_minitaur_prior_file
    from pacplan.pipeline.rundir import Manifest, RunDir

    for manifest in sorted((Path(__file__).resolve().parents[1] / "results").glob(
            "*/manifest.json")):
        run = manifest.parent
        prior = run / RunDir.PRIOR
        try:
            if not prior.exists() and paper_data_dir() is not None and \
                    Manifest(run).sha(RunDir.PRIOR) == MINITAUR_PRIOR_SHA256:
                write_minitaur_prior_file(prior)
            Manifest(run).check(RunDir.POLICIES)
        except PacplanError:  # the paper's files are not here: its tests say so themselves
            continue


def _missing_message(d: Path | None) -> str:
    """Why the matrices are missing and the one command that fetches them."""
    where = (f"in {d}" if d is not None else
             f"($PACPLAN_PAPER_DATA unset, no ../shared/data/paper, cache {default_cache_dir()} "
             "incomplete)")
    return (f"paper matrices not found {where}: run `pacplan data paper` to download them, "
            "or set PACPLAN_PAPER_DATA")


@pytest.fixture(scope="session")
def paper_dir() -> Path:
    """The folder holding the paper's matrices; under CI a missing folder fails, never skips."""
    d = paper_data_dir()
    if d is None or not (d / "C_quadrotor.npy").is_file():
        if os.environ.get("CI"):  # in CI the data must be there: never pass by skipping
            pytest.fail(_missing_message(d))
        pytest.skip(_missing_message(d))
    return d


@pytest.fixture(scope="session")
def paper_cert(paper_dir: Path) -> np.ndarray:
    return np.load(paper_dir / "C_quadrotor.npy", allow_pickle=False).astype(np.float64)


@pytest.fixture(scope="session")
def paper_test(paper_dir: Path) -> np.ndarray:
    return np.load(paper_dir / "C_quadrotor_emp_test.npy", allow_pickle=False).astype(np.float64)


def _paper_file(paper_dir: Path, name: str) -> Path:
    """A file of the paper's folder; a folder fetched before pacplan fetched it lacks it."""
    path = paper_dir / name
    if not path.is_file():
        message = (f"{name} not in {paper_dir}: run `pacplan data paper` again (it fetches "
                   "only the files missing)")
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def paper_minitaur_cert(paper_dir: Path) -> np.ndarray:
    """The paper's quadruped certification matrix (4000 × 50), as published: 48 costs > 1."""
    path = _paper_file(paper_dir, "C_minitaur.npy")
    return np.load(path, allow_pickle=False).astype(np.float64)


@pytest.fixture(scope="session")
def paper_minitaur_test(paper_dir: Path) -> np.ndarray:
    """The paper's quadruped test matrix (5000 × 50), as published: 80 costs > 1."""
    path = _paper_file(paper_dir, "C_minitaur_emp_test.npy")
    return np.load(path, allow_pickle=False).astype(np.float64)
