"""Bounds against independent oracles: high-precision root finding, closed forms, the paper."""

from __future__ import annotations

import json

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pacplan.errors import PacplanError
from pacplan.pacbayes import bounds

mp.mp.dps = 50


def _kl_exact(q: mp.mpf, p: mp.mpf) -> mp.mpf:
    a = q * mp.log(q / p) if q > 0 else mp.mpf(0)
    b = (1 - q) * mp.log((1 - q) / (1 - p)) if q < 1 else mp.mpf(0)
    return a + b


def _kl_inverse_exact(q: float, c: float) -> float:
    """sup{p : kl(q‖p) ≤ c} by 200 bisection steps in 50-digit arithmetic."""
    q_, c_ = mp.mpf(q), mp.mpf(c)
    if q_ >= 1:
        return 1.0
    top = 1 - mp.mpf(10) ** -40
    if _kl_exact(q_, top) <= c_:
        return 1.0
    lo, hi = q_, top
    for _ in range(200):
        mid = (lo + hi) / 2
        if _kl_exact(q_, mid) <= c_:
            lo = mid
        else:
            hi = mid
    return float(hi)


def test_kl_bernoulli_matches_definition():
    rng = np.random.default_rng(1)
    q, p = rng.random(50), rng.random(50)
    expected = [float(_kl_exact(mp.mpf(a), mp.mpf(b))) for a, b in zip(q, p)]
    np.testing.assert_allclose(bounds.kl_bernoulli(q, p), expected, rtol=1e-12)
    assert bounds.kl_bernoulli(0.3, 0.3) == pytest.approx(0.0, abs=1e-15)
    assert bounds.kl_bernoulli(0.0, 0.5) == pytest.approx(np.log(2))
    assert np.isinf(bounds.kl_bernoulli(0.5, 1.0))


def test_kl_inverse_is_upper_and_within_1e9_of_exact():
    rng = np.random.default_rng(2)
    q = np.concatenate([[0.0, 0.0, 1.0, 0.5, 1e-9, 0.999999, 0.2, 0.3],
                        rng.random(150), rng.random(50) ** 8])
    c = np.concatenate([[1e-3, 40.0, 0.1, 0.0, 1e-12, 1e-3, 5.0, 1e-15],
                        rng.exponential(0.05, 150), rng.exponential(1e-4, 50)])
    got = bounds.kl_inverse(q, c)
    exact = np.array([_kl_inverse_exact(a, b) for a, b in zip(q, c)])
    assert got.shape == q.shape
    assert np.all(got >= exact), "kl inverse must never fall below the exact supremum"
    assert np.max(got - exact) <= 1e-9


def test_kl_inverse_lower_mirrors_upper():
    q, c = np.array([0.2, 0.0, 0.7]), np.array([0.01, 0.1, 0.05])
    lower = bounds.kl_inverse_lower(q, c)
    exact = np.array([1.0 - _kl_inverse_exact(1.0 - a, b) for a, b in zip(q, c)])
    assert np.all(lower <= exact + 1e-15) and np.max(exact - lower) <= 1e-9
    assert lower[1] == 0.0


def test_r_term_and_closed_forms():
    emp, kl, n, delta = 0.18, 0.25, 4000, 0.01
    r = (kl + np.log(2 * np.sqrt(n) / delta)) / (2 * n)
    assert bounds.r_term(kl, n, delta) == pytest.approx(r, rel=1e-14)
    assert bounds.mcallester(emp, kl, n, delta) == pytest.approx(emp + np.sqrt(r), rel=1e-14)
    assert bounds.quadratic(emp, kl, n, delta) == pytest.approx(
        (np.sqrt(emp + r) + np.sqrt(r)) ** 2, rel=1e-14)
    assert bounds.klinv(emp, kl, n, delta) == pytest.approx(_kl_inverse_exact(emp, 2 * r), abs=1e-9)


def test_klinv_is_tightest_everywhere():
    """McAllester and quadratic are relaxations of kl-inverse: it is never larger than either."""
    rng = np.random.default_rng(3)
    emp, kl = rng.random(2000), rng.exponential(2.0, 2000)
    n = rng.integers(1, 10000, 2000)
    delta = rng.uniform(1e-4, 0.5, 2000)
    k = bounds.klinv(emp, kl, n, delta)
    assert np.all(k <= bounds.mcallester(emp, kl, n, delta) + 1e-11)
    assert np.all(k <= bounds.quadratic(emp, kl, n, delta) + 1e-11)
    assert np.all(k >= emp)


def test_bounds_grow_with_cost_and_kl():
    e = np.linspace(0, 0.9, 50)
    for fn in bounds.BOUND_FUNCTIONS.values():
        assert np.all(np.diff(fn(e, 0.3, 1000, 0.01)) > 0)
        assert np.all(np.diff(fn(0.2, e * 5, 1000, 0.01)) > 0)


def test_paper_posterior_reproduces_table1(paper_cert, paper_dir):
    """The paper's own posterior on its own matrix gives its Table 1 quadratic figure (N = 4000)."""
    p = np.load(paper_dir / "p_quadrotor.npy", allow_pickle=False)
    emp = float(paper_cert.mean(axis=0) @ p)
    kl = float(np.sum(p * np.log(p * p.size)))
    assert bounds.quadratic(emp, kl, 4000, 0.01) == pytest.approx(0.2155, abs=5e-5)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"delta": -0.1}, "delta"),
        ({"n": 0}, "N"),
        ({"n": 2.5}, "N"),
        ({"emp": -0.01}, "empirical cost"),
        ({"emp": 1.01}, "empirical cost"),
        ({"emp": float("nan")}, "NaN"),
        ({"kl": -0.5}, "KL"),
    ],
)
def test_bad_input_is_named(kwargs, message):
    args = {"emp": 0.2, "kl": 0.1, "n": 100, "delta": 0.01, **kwargs}
    for fn in bounds.BOUND_FUNCTIONS.values():
        with pytest.raises(PacplanError, match=message):
            fn(**args)


# --------------------------------------------------------------------------- at the edges
# Ĉ down to the smallest subnormal, δ down to 5e-324, N up to 2**53: the oracles are R and
# the kl inverse in 50-digit arithmetic (and, for Ĉ = 0, the closed form 1 − e^{−2R}).


EDGE_DPS = 400  # 1 − Ĉ for Ĉ = 5e-324 keeps Ĉ only with more than 324 digits


def _r_exact(kl: float, n: float, delta: float) -> mp.mpf:
    with mp.workdps(EDGE_DPS):
        return (mp.mpf(kl) + mp.log(2) + mp.log(mp.mpf(n)) / 2 - mp.log(mp.mpf(delta))) / (2 * n)


def _kl_precise(q: float, p: float | mp.mpf) -> mp.mpf:
    with mp.workdps(EDGE_DPS):
        return _kl_exact(mp.mpf(q), mp.mpf(p))


def _root_exact(q: float, c: mp.mpf, dps: int = EDGE_DPS) -> mp.mpf:
    """sup{p : kl(q‖p) ≤ c} in `dps` digits: the closed form at q = 0, else bisection of [q, 1)
    until the bracket is 2^-64 of its upper end."""
    with mp.workdps(dps):
        q_ = mp.mpf(q)
        if q_ == 0:
            return -mp.expm1(-c)
        top = 1 - mp.mpf(10) ** -40
        if _kl_exact(q_, top) <= c:
            return mp.mpf(1)
        lo, hi = q_, top
        while hi - lo > hi * mp.mpf(2) ** -64:
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if _kl_exact(q_, mid) <= c else (lo, mid)
        return hi


TINY_EMP = [0.0, 5e-324, 1e-310, 1e-100, 1e-20, 1e-9, 1e-4]
TINY_DELTA = [0.05, 1e-300, 5e-324]
HUGE_N = [1, 1000, 10**6, 10**12, 2**53]
KLS = [0.0, 1e-3, 200.0]


def _edge_cases() -> list[tuple[float, float, int, float]]:
    return [(e, k, n, d) for e in TINY_EMP for k in KLS for n in HUGE_N for d in TINY_DELTA]


def test_r_term_is_finite_and_exact_for_the_smallest_delta():
    cases = [(k, n, d) for k in KLS for n in HUGE_N for d in TINY_DELTA]
    got = bounds.r_term(*map(np.array, zip(*cases)))
    want = np.array([float(_r_exact(k, n, d)) for k, n, d in cases])
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_klinv_of_tiny_emp_tiny_delta_and_huge_n_is_the_exact_inverse():
    """`pacplan bound --emp 5e-324 --kl 0 -n 1000000` printed 1.0 (the subnormal Ĉ made
    kl(Ĉ‖p) = −Ĉ·∞ < 0 for every p): now every case is at most 1e-10 relative above the exact
    sup and never more than R's own rounding (1e-15 relative) below it."""
    cases = _edge_cases()
    emp, kl, n, delta = map(np.array, zip(*cases))
    got = bounds.klinv(emp, kl, n, delta)
    # 2R ≥ 1e-14 here, so 60 digits hold kl(Ĉ‖p) to 1e-40 even where 1 − Ĉ drops Ĉ
    want = np.array([float(_root_exact(e, 2 * _r_exact(k, nn, d), dps=60))
                     for e, k, nn, d in cases])
    assert np.all(got >= want * (1 - 1e-15)), "below the exact kl inverse"
    assert np.all(got <= want * (1 + 1e-10)), np.max(got / want - 1)
    i = cases.index((5e-324, 0.0, 10**6, 0.05))
    assert got[i] == pytest.approx(-np.expm1(-np.log(2e3 / 0.05) / 1e6), rel=1e-10)
    assert 1.2e-5 < float(bounds.klinv(5e-324, 0.0, 10**6, 0.01)) < 1.23e-5


def test_kl_bernoulli_of_a_subnormal_emp_is_its_definition():
    q, p = np.array([5e-324, 1e-310, 1e-309, 2e-308]), np.array([1e-5, 0.5, 1e-300, 0.9])
    want = [float(_kl_precise(a, b)) for a, b in zip(q, p)]
    np.testing.assert_allclose(bounds.kl_bernoulli(q, p), want, rtol=1e-14)


def test_the_cli_bound_of_a_subnormal_emp(capsys):
    from helpers import cli

    code, out, _ = cli(["bound", "--emp", "5e-324", "--kl", "0", "-n", "1000000", "--json"],
                       capsys)
    true = float(-mp.expm1(-2 * _r_exact(0.0, 10**6, 0.01)))
    assert code == 0 and json.loads(out)["klinv"] == pytest.approx(true, rel=1e-10)
    assert json.loads(out)["klinv"] >= true


@settings(max_examples=300, deadline=None)
@given(q=st.one_of(st.floats(0.0, 1e-6, allow_subnormal=True), st.floats(0.0, 1.0)),
       c=st.floats(1e-300, 60.0))
def test_kl_inverse_brackets_its_root(q: float, c: float) -> None:
    """Property: kl(q‖x) ≥ c at the returned x (it is beyond the root, in exact arithmetic) and
    kl(q‖x') ≤ c a hair below, at x' = x − 1e-10·x − 1e-300 (it is no further beyond)."""
    x = float(bounds.kl_inverse(q, c))
    assert q <= x <= 1.0
    if x < 1.0:
        assert _kl_precise(q, x) >= c
    below = x - 1e-10 * x - 1e-300
    if below > q:
        assert _kl_precise(q, below) <= c
