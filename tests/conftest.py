"""Shared fixtures: the paper's published UAV cost matrices (real data, used as an oracle)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


def paper_data_dir() -> Path:
    """`../shared/data/paper` beside the checkout (CI puts shared/ there) or $PACPLAN_PAPER_DATA."""
    env = os.environ.get("PACPLAN_PAPER_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data" / "paper"


@pytest.fixture(scope="session")
def paper_dir() -> Path:
    d = paper_data_dir()
    if not (d / "C_quadrotor.npy").is_file():
        message = f"paper matrices not found in {d} (set PACPLAN_PAPER_DATA)"
        if os.environ.get("CI"):  # in CI the data must be there: never pass by skipping
            pytest.fail(message)
        pytest.skip(message)
    return d


@pytest.fixture(scope="session")
def paper_cert(paper_dir: Path) -> np.ndarray:
    return np.load(paper_dir / "C_quadrotor.npy", allow_pickle=False).astype(np.float64)


@pytest.fixture(scope="session")
def paper_test(paper_dir: Path) -> np.ndarray:
    return np.load(paper_dir / "C_quadrotor_emp_test.npy", allow_pickle=False).astype(np.float64)
