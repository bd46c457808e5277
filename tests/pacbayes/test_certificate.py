"""Certificates: save/load, verification against the referenced matrices, tampering detected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pacplan.choices import BOUNDS
from pacplan.errors import PacplanError
from pacplan.pacbayes.certificate import build_certificate, confidence_interval
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.pacbayes.record import Certificate
from pacplan.pacbayes.verify import verify


@pytest.fixture
def saved(tmp_path: Path, paper_dir: Path) -> Path:
    for name in ("C_quadrotor.npy", "C_quadrotor_emp_test.npy"):
        shutil.copy(paper_dir / name, tmp_path / name)
    cert = load_cost_matrix(tmp_path / "C_quadrotor.npy", rows=1000)
    test = load_cost_matrix(tmp_path / "C_quadrotor_emp_test.npy")
    c = build_certificate(cert, 0.01, bound="quadratic", test=test)
    return c.save(tmp_path / "out" / "certificate.json")


def test_certificate_contents(saved: Path):
    c = Certificate.load(saved)
    values = {b: getattr(c, b) for b in BOUNDS}
    assert c.certified == min(values.values()) and c.certified_by == "klinv"
    assert c.n == 1000 and c.m == 50 and c.delta == 0.01
    assert c.test_n == 5000 and c.test_ci[0] <= c.test_cost <= c.test_ci[1]
    assert c.test_cost == pytest.approx(0.184, abs=0.003)
    assert c.certified >= c.test_ci[0]
    assert sum(c.p) == pytest.approx(1.0)
    # matrix paths are stored relative to the certificate, so a results folder can move
    raw = json.loads(saved.read_text())
    assert raw["cert_matrix"]["path"] == "../C_quadrotor.npy"


def test_verify_accepts_untouched_certificate(saved: Path):
    assert verify(saved).certified > 0


def test_verify_detects_changed_matrix(saved: Path):
    path = saved.parent.parent / "C_quadrotor.npy"
    c = np.load(path)
    c[0, 0] = 1.0 - c[0, 0]
    np.save(path, c)
    with pytest.raises(PacplanError, match=r"certification matrix .* has changed"):
        verify(saved)


def test_verify_detects_missing_test_matrix(saved: Path):
    (saved.parent.parent / "C_quadrotor_emp_test.npy").unlink()
    with pytest.raises(PacplanError, match=r"test matrix .* is missing"):
        verify(saved)


@pytest.mark.parametrize("key", ["quadratic", "klinv", "emp_cost", "test_cost"])
def test_verify_detects_edited_numbers(saved: Path, key: str):
    d = json.loads(saved.read_text())
    d[key] *= 0.99
    saved.write_text(json.dumps(d))
    with pytest.raises(PacplanError, match=key):
        verify(saved)


def test_verify_detects_suboptimal_posterior(saved: Path, paper_dir: Path):
    """A consistent certificate for the uniform prior is caught as not optimal."""
    d = json.loads(saved.read_text())
    cert = load_cost_matrix(saved.parent.parent / "C_quadrotor.npy", rows=1000)
    test = load_cost_matrix(saved.parent.parent / "C_quadrotor_emp_test.npy")
    from pacplan.pacbayes.posterior import evaluate_posterior, uniform_prior

    u = uniform_prior(50)
    c = build_certificate(cert, 0.01, "quadratic", test=test,
                          posterior=evaluate_posterior(u, cert.values, u, "quadratic", 0.01,
                                                       "gibbs", 0.0))
    c.save(saved)
    assert json.loads(saved.read_text())["p"] != d["p"]
    with pytest.raises(PacplanError, match="not optimal"):
        verify(saved)


def test_clip_is_recorded(tmp_path: Path):
    c = np.full((50, 3), 0.3)
    c[0, 0] = 1.2
    np.save(tmp_path / "c.npy", c)
    with pytest.raises(PacplanError, match="outside"):
        load_cost_matrix(tmp_path / "c.npy")
    m = load_cost_matrix(tmp_path / "c.npy", clip=True)
    cert = build_certificate(m, 0.05)
    assert cert.clip and cert.cert_matrix.clipped == 1
    cert.save(tmp_path / "cert.json")
    assert verify(tmp_path / "cert.json").clip


def test_test_interval_covers_truth_in_99_percent():
    rng = np.random.default_rng(5)
    misses = 0
    for _ in range(400):
        x = rng.beta(0.5, 2.0, size=200)  # mean 0.2
        lo, hi = confidence_interval(x)
        misses += not lo <= 0.2 <= hi
    assert misses <= 4
    assert confidence_interval(np.zeros(5000))[1] > 0  # no degenerate interval at all-zero costs


def test_mismatched_columns(tmp_path: Path):
    np.save(tmp_path / "a.npy", np.zeros((10, 3)))
    np.save(tmp_path / "b.npy", np.zeros((10, 4)))
    with pytest.raises(PacplanError, match="4 policies"):
        build_certificate(load_cost_matrix(tmp_path / "a.npy"), 0.01,
                          test=load_cost_matrix(tmp_path / "b.npy"))
