"""The central home of user-facing rules: each check accepts what it should and names the rule."""

from __future__ import annotations

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.validation import (
    INT64_MAX,
    MAX_WHOLE,
    check_delta,
    check_int,
    check_int64_seed_range,
    check_keyword_options,
    check_kl,
    check_n,
    check_policies,
    check_real,
    check_safe_name,
    check_unique,
    check_whole_number,
)

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


@pytest.mark.parametrize(("value", "expected"),
                         [(4000, 4000), ("4000", 4000), ("4e3", 4000), (4000.0, 4000),
                          (np.int64(7), 7), (" 12 ", 12), (MAX_WHOLE, MAX_WHOLE)])
def test_whole_numbers_accepted(value, expected) -> None:
    assert check_whole_number(value, "N") == expected


@pytest.mark.parametrize("value", [True, "abc", 4000.5, "1e20", 10**20, 0, -3, float("nan"),
                                   float("inf"), None, [1], MAX_WHOLE + 1])
def test_whole_numbers_refused_with_the_range(value) -> None:
    with pytest.raises(PacplanError, match=f"N must be a whole number from 1 to {MAX_WHOLE}"):
        check_whole_number(value, "N")


@pytest.mark.parametrize("n", [10**20, 1e20, float("inf"), float("nan"), 0, 2.5])
def test_check_n_says_whole_number_not_integer_at_least_one(n) -> None:
    with pytest.raises(PacplanError) as info:
        check_n(n)
    assert "whole number from 1 to" in str(info.value)
    assert "integer ≥ 1" not in str(info.value)


def test_check_n_accepts_arrays_of_counts() -> None:
    assert check_n(np.array([1, 4000])).tolist() == [1.0, 4000.0]


def test_int64_seed_ranges() -> None:
    assert check_int64_seed_range([0, INT64_MAX], "seeds.cert") == (0, INT64_MAX)
    with pytest.raises(PacplanError, match=r"seeds\.cert \[0, 100000000000000000000\) goes "
                                           "beyond the largest seed"):
        check_int64_seed_range([0, 10**20], "seeds.cert")
    for bad, rule in [([5, 5], "empty"), ([-1, 3], ">= 0"), ([0, True], "two integers"),
                      ([0.0, 3], "two integers"), ([1, 2, 3], "two integers"), ("ab", "two")]:
        with pytest.raises(PacplanError, match=rule):
            check_int64_seed_range(bad, "seeds.cert")


@pytest.mark.parametrize("name", ["toy", "uav-quick", "run_2.v1", "A"])
def test_safe_names(name: str) -> None:
    assert check_safe_name(name) == name


@pytest.mark.parametrize("name", ["../x", "..", "a/b", "a\\b", "/abs", ".x", "-x", "_x", "a..b",
                                  "", "x\n", "a b", 5, None])
def test_unsafe_names(name) -> None:
    with pytest.raises(PacplanError, match=r"run name .* is not a safe name"):
        check_safe_name(name, "run name")


def test_unique() -> None:
    check_unique(["a", "b"], "baseline name")
    with pytest.raises(PacplanError, match="duplicate baseline name 'a'"):
        check_unique(["a", "b", "a"], "baseline name")


def test_int_and_real() -> None:
    assert check_int(3, "k", minimum=1) == 3
    assert check_real(2, "x") == 2.0 and check_real(np.float32(0.5), "x", above=0.0) == 0.5
    for bad in (True, 3.0, "3", None):
        with pytest.raises(PacplanError, match="k must be an integer"):
            check_int(bad, "k")
    with pytest.raises(PacplanError, match="k must be an integer >= 1, got 0"):
        check_int(0, "k", minimum=1)
    for bad in (True, "0.5", None, [1.0]):
        with pytest.raises(PacplanError, match="x must be a number"):
            check_real(bad, "x")
    with pytest.raises(PacplanError, match="finite"):
        check_real(float("inf"), "x")
    with pytest.raises(PacplanError, match="x must be > 0"):
        check_real(0.0, "x", above=0.0)


@pytest.mark.parametrize("huge", [10**400, -(10**400), 10**5000], ids=["1e400", "-1e400", "1e5000"])
def test_an_int_too_large_for_a_float_is_one_line(huge: int) -> None:
    """float(10**400) raises OverflowError: every check that takes a number names the input
    instead, in a short line (Python cannot even print 10**5000)."""
    checks = [lambda: check_real(huge, "x"), lambda: check_real(huge, "x", minimum=0.0),
              lambda: check_delta(huge), lambda: check_kl(huge),
              lambda: check_int(huge, "k", 1, 9), lambda: check_whole_number(huge, "N")]
    for check in checks:
        with pytest.raises(PacplanError) as info:
            check()
        message = str(info.value)
        assert "\n" not in message and len(message) < 120, message


def _factory(dim: int = 8, scale: float | None = None, flag: bool = True) -> None:
    """A stand-in world factory."""


def test_keyword_options() -> None:
    check_keyword_options("world 'w'", _factory, {"dim": 3, "scale": 2, "flag": False})
    check_keyword_options("world 'w'", _factory, {"scale": None})
    cases = [({"dim": "8"}, "option 'dim' must be int, got '8'"),
             ({"dim": True}, "option 'dim' must be int, got True"),
             ({"scale": True}, "option 'scale' must be float | None"),
             ({"flag": 1}, "option 'flag' must be bool"),
             ({"size": 3}, "unknown option 'size'; its options are dim, scale, flag")]
    for options, message in cases:
        with pytest.raises(PacplanError, match=f"world 'w': {message}"):
            check_keyword_options("world 'w'", _factory, options)


def test_keyword_options_with_kwargs_or_no_annotations() -> None:
    def loose(a, **rest):
        return None

    check_keyword_options("f", loose, {"a": "anything", "b": 1})


def test_policies_too_large_for_float32_are_refused() -> None:
    """1e39 is finite in float64 but infinite once cast to the float32 the worlds fly."""
    with pytest.raises(PacplanError, match="as float32"):
        check_policies(np.array([[0.0, 1e39]]), 2)
    assert check_policies(np.array([0.5, -1.0]), 2).dtype == np.float32


def test_overlapping_ranges_brute_force() -> None:
    """Against a brute-force set intersection on small ranges."""
    from pacplan.validation import overlapping_ranges

    rng = np.random.default_rng(0)
    for _ in range(300):
        starts = rng.integers(0, 20, 3)
        ranges = {k: (int(s), int(s + rng.integers(1, 8))) for k, s in zip("abc", starts)}
        expected = [(a, b) for i, a in enumerate("abc") for b in "abc"[i + 1:]
                    if set(range(*ranges[a])) & set(range(*ranges[b]))]
        assert overlapping_ranges(ranges) == expected


def test_short_shows_a_value_it_cannot_print_by_its_kind() -> None:
    """An integer of over 4300 digits has no repr, nor JSON inside a record: a message says
    its size (or its container's kind) instead of ending in a traceback."""
    from pacplan.errors import short

    assert short(10**5000) == "an integer of 16610 bits"
    assert short({"n": 10**5000}, as_json=True) == "a dict holding an integer too large to show"
    assert short(list(range(100)), 20) == "[0, 1, 2, 3, 4, 5, …" + " (390 characters)"
    assert short({"b": 1, "a": [2]}, as_json=True) == '{"a": [2], "b": 1}'
