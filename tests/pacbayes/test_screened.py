"""Screened certificates: the posterior restricted to k of the m policies, KL against all m.

Oracles: the paper's quadruped matrices (its 50 draws on 4000 terrains), brute force over the
restricted posteriors, the unscreened optimum (a restriction can only raise the bound), and the
identity KL(p‖uniform over m) = KL(p‖uniform over the k) + ln(m/k).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.pacbayes import bounds
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.pacbayes.posterior import optimize_gibbs, optimize_gibbs_columns
from pacplan.pacbayes.schema import certificate_content_sha256
from pacplan.pacbayes.verify import verify
from pacplan.pipeline.stages import screen_columns

DELTA = 0.01


@pytest.fixture(scope="module")
def minitaur(paper_minitaur_cert: np.ndarray) -> np.ndarray:
    return np.clip(paper_minitaur_cert, 0.0, 1.0)


def test_every_column_is_the_plain_optimum(minitaur: np.ndarray):
    plain = optimize_gibbs(minitaur[:1000], DELTA, "best")
    all_columns = optimize_gibbs_columns(minitaur[:1000], 50, DELTA, "best")
    assert all_columns.value == pytest.approx(plain.value, rel=1e-12)
    np.testing.assert_allclose(all_columns.p, plain.p, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [1000, 4000])
@pytest.mark.parametrize("keep", [1, 5, 15])
def test_screened_bound_is_valid_and_never_below_the_plain_one(minitaur, n, keep):
    columns = screen_columns(minitaur[:1000], keep)
    post = optimize_gibbs_columns(minitaur[:n, columns], 50, DELTA, "klinv")
    plain = optimize_gibbs(minitaur[:n], DELTA, "klinv")
    assert post.value >= plain.value - 1e-12  # restricting the support cannot help
    # the KL identity: against all 50, at least ln(50/k) however the mass sits on the k
    p = post.p
    on_k = float(np.sum(p[p > 0] * np.log(p[p > 0] * keep)))
    assert post.kl == pytest.approx(on_k + math.log(50 / keep), abs=1e-9)
    assert post.emp_cost == pytest.approx(float(minitaur[:n, columns].mean(axis=0) @ p), abs=1e-12)
    assert post.value == pytest.approx(
        float(bounds.bound_value("klinv", post.emp_cost, post.kl, n, DELTA)), rel=1e-12)


def test_screened_optimum_matches_brute_force_over_two_columns(minitaur):
    """k = 2: every restricted posterior is (q, 1 − q); a fine grid over q finds the optimum."""
    columns = screen_columns(minitaur[:1000], 2)
    costs = minitaur[:2000, columns]
    cbar = costs.mean(axis=0)
    q = np.linspace(0.0, 1.0, 200_001)
    emp = q * cbar[0] + (1 - q) * cbar[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = (np.where(q > 0, q * np.log(q * 50), 0.0)
              + np.where(q < 1, (1 - q) * np.log((1 - q) * 50), 0.0))
    brute = float(np.min(bounds.bound_value("klinv", emp, kl, 2000, DELTA)))
    post = optimize_gibbs_columns(costs, 50, DELTA, "klinv")
    assert post.value == pytest.approx(brute, abs=1e-7)


def test_screening_keeps_the_least_costly_policies(minitaur):
    columns = screen_columns(minitaur[:1000], 15)
    means = minitaur[:1000].mean(axis=0)
    assert columns == sorted(columns) and len(set(columns)) == 15
    assert means[columns].max() <= np.delete(means, columns).min()
    # ties go to the lower index, whatever the order of the columns' values
    tied = np.zeros((4, 6))
    tied[:, [0, 5]] = 0.5
    assert screen_columns(tied, 3) == [1, 2, 3]


def test_on_the_papers_matrix_fifteen_kept_lose_little(minitaur, paper_minitaur_test):
    """The paper's 50 draws, screened on the first 1000 terrains to the 15 best: the N = 4000
    bound within 0.1 point of the unscreened one, its test cost within 0.5 point."""
    columns = screen_columns(minitaur[:1000], 15)
    post = optimize_gibbs_columns(minitaur[:, columns], 50, DELTA, "best")
    plain = optimize_gibbs(minitaur, DELTA, "best")
    assert post.value - plain.value < 1e-3
    test = np.clip(paper_minitaur_test, 0.0, 1.0)
    assert abs(test[:, columns].mean(axis=0) @ post.p - test.mean(axis=0) @ plain.p) < 5e-3


def _screened(tmp_path: Path, minitaur: np.ndarray, keep: int = 5) -> tuple[Path, list[int]]:
    columns = screen_columns(minitaur[:1000], keep)
    np.save(tmp_path / "cert.npy", minitaur[:2000, columns])
    np.save(tmp_path / "test.npy", minitaur[2000:, columns])
    c = build_certificate(load_cost_matrix(tmp_path / "cert.npy"), DELTA,
                          test=load_cost_matrix(tmp_path / "test.npy"), columns=columns, m=50)
    return c.save(tmp_path / "c.json"), columns


def test_screened_certificate_round_trips_through_verify(tmp_path, minitaur):
    path, columns = _screened(tmp_path, minitaur)
    c = verify(path)
    assert c.m == 50 and c.columns == columns and len(c.p) == 50
    assert sum(c.p[i] for i in columns) == pytest.approx(1.0, abs=1e-12)
    assert all(c.p[i] == 0.0 for i in range(50) if i not in columns)
    assert "posterior on 5 screened" in str(c)


def _tamper(path: Path, **changes) -> Path:
    """Edit fields and re-hash the content: verify must catch it by recomputing."""
    d = json.loads(path.read_text())
    d.update(changes)
    d.pop("content_sha256")
    d["content_sha256"] = certificate_content_sha256(d)
    path.write_text(json.dumps(d))
    return path


@pytest.mark.parametrize("change, message", [
    ("mass_off", "outside columns"),
    ("unsorted", "distinct increasing"),
    ("too_few", "outside columns"),
    ("rep", "solved by gibbs"),
])
def test_verify_refuses_a_damaged_screened_certificate(tmp_path, minitaur, change, message):
    path, columns = _screened(tmp_path, minitaur)
    d = json.loads(path.read_text())
    if change == "mass_off":
        p = d["p"]
        off = next(i for i in range(50) if i not in columns)
        p[off], p[columns[0]] = p[columns[0]], 0.0
        _tamper(path, p=p)
    elif change == "unsorted":
        _tamper(path, columns=columns[::-1])
    elif change == "too_few":
        _tamper(path, columns=columns[:4])
    else:
        _tamper(path, solver="rep:clarabel", beta=None)
    with pytest.raises(PacplanError, match=message):
        verify(path)


def test_a_plain_certificate_has_no_columns_field(tmp_path, minitaur):
    np.save(tmp_path / "cert.npy", minitaur[:500])
    c = build_certificate(load_cost_matrix(tmp_path / "cert.npy"), DELTA)
    assert "columns" not in json.loads(c.save(tmp_path / "c.json").read_text())
    assert verify(tmp_path / "c.json").columns is None


@pytest.mark.parametrize("columns, m, message", [
    ([0, 1, 2], None, "needs m"),
    ([0, 1, 2], 3, "all 3 policies"),
    ([0, 2, 1], 10, "distinct increasing"),
    ([0, 1, 12], 10, r"in \[0, 10\)"),
    ([0, 1], 10, "lists 2 policies but the cost matrix has 3"),
])
def test_build_refuses_bad_columns(tmp_path, columns, m, message):
    np.save(tmp_path / "cert.npy", np.full((20, 3), 0.25))
    with pytest.raises(PacplanError, match=message):
        build_certificate(load_cost_matrix(tmp_path / "cert.npy"), DELTA, columns=columns, m=m)


def test_build_refuses_rep_when_screened(tmp_path):
    np.save(tmp_path / "cert.npy", np.full((20, 3), 0.25))
    with pytest.raises(PacplanError, match="needs solver gibbs"):
        build_certificate(load_cost_matrix(tmp_path / "cert.npy"), DELTA, solver="rep",
                          columns=[0, 1, 2], m=10)
