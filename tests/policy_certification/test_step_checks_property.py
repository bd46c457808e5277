"""A property test of the checks between a policy and an environment
(`pacplan.worlds.from_gym.steps`), with Gymnasium's own `Space.contains` as the oracle: an action
is accepted exactly when it is real, finite and in the space, is handed over unchanged, and
with `clip` comes back inside the space; a reward is accepted exactly when it is one finite
real number."""

from __future__ import annotations

import math

import numpy as np
import pytest
from gymnasium import spaces
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from pacplan.errors import PacplanError
from pacplan.worlds.from_gym.steps import checked_action, checked_reward

BOXES = [spaces.Box(-2.0, 2.0, (1,), np.float32),
         spaces.Box(np.array([-1.0, 0.0]), np.array([1.0, 0.5]), dtype=np.float64),
         spaces.Box(-np.inf, np.inf, (2,), np.float32),
         spaces.Box(0, 10, (2,), np.int64)]
DTYPES = st.sampled_from([np.float32, np.float64, np.int64, np.int8, np.bool_])
SHAPES = st.sampled_from([(), (1,), (2,), (1, 2)])
VALUES = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.integers(-20, 20)


def _arrays() -> st.SearchStrategy[np.ndarray]:
    return st.tuples(DTYPES, SHAPES).flatmap(
        lambda ds: hnp.arrays(ds[0], ds[1], elements=VALUES.map(
            lambda v: _fit(v, ds[0]))))


def _fit(value: float, dtype: type) -> object:
    """`value` as something `dtype` can hold (hypothesis refuses lossy elements)."""
    if dtype is np.bool_:
        return bool(value) if math.isfinite(value) else True
    if np.issubdtype(dtype, np.integer):
        return int(max(-20.0, min(20.0, value))) if math.isfinite(value) else 0
    with np.errstate(over="ignore"):
        return float(np.asarray(value, dtype))


def _oracle(action: np.ndarray, space: spaces.Box) -> bool:
    """Real, finite, and Gymnasium's `contains` of it in the space's dtype."""
    if action.dtype.kind not in "iuf" or action.shape != space.shape:
        return False
    if np.issubdtype(space.dtype, np.integer) and action.dtype.kind == "f":
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        cast = action.astype(space.dtype)
    if not (np.isfinite(action.astype(np.float64)).all() and np.isfinite(cast).all()):
        return False
    return bool(space.contains(cast))


@settings(max_examples=300, deadline=None)
@given(space_index=st.integers(0, len(BOXES) - 1), action=_arrays(), clip=st.booleans())
def test_a_box_action_is_accepted_exactly_when_it_is_in_the_space(space_index: int,
                                                                   action: np.ndarray,
                                                                   clip: bool) -> None:
    space = BOXES[space_index]
    ok = _oracle(action, space)
    try:
        got, clipped = checked_action(action, space, clip)
    except PacplanError as exc:
        assert "\n" not in str(exc)
        if ok:
            pytest.fail(f"{action!r} is in {space} but was refused: {exc}")
        with np.errstate(over="ignore", invalid="ignore"):
            cast = action.astype(space.dtype)
        real = (action.dtype.kind in "iuf" and action.shape == space.shape
                and np.isfinite(action.astype(np.float64)).all() and np.isfinite(cast).all())
        assert not (clip and real and not (np.issubdtype(space.dtype, np.integer)
                                           and action.dtype.kind == "f")), exc
        return
    if ok:
        assert got is action and not clipped  # handed over unchanged
    else:  # only clipping may accept what is outside
        assert clip and clipped
    assert space.contains(np.asarray(got, space.dtype))


@settings(max_examples=200, deadline=None)
@given(action=st.one_of(st.integers(-3, 6), st.booleans(), st.floats(-3, 6), st.text(max_size=2),
                        st.none(), hnp.arrays(np.int64, st.sampled_from([(), (1,)]),
                                              elements=st.integers(-3, 6))))
def test_a_discrete_action_is_an_integer_in_the_space(action: object) -> None:
    space = spaces.Discrete(3, start=1)
    scalar = action[()] if isinstance(action, np.ndarray) and action.shape == () else action
    ok = (isinstance(scalar, int | np.integer) and not isinstance(scalar, bool)
          and space.contains(scalar))
    try:
        got, clipped = checked_action(action, space)
    except PacplanError:
        assert not ok
        return
    assert ok and got is action and not clipped


@settings(max_examples=300, deadline=None)
@given(reward=st.one_of(st.floats(), st.integers(), st.booleans(), st.text(max_size=3),
                        st.none(), st.complex_numbers(),
                        hnp.arrays(np.float64, st.sampled_from([(), (1,), (2,)])),
                        st.just(10**400)))
def test_a_reward_is_one_finite_real_number(reward: object) -> None:
    value = reward[()] if isinstance(reward, np.ndarray) and reward.shape == () else reward
    real = (isinstance(value, int | float | np.floating | np.integer)
            and not isinstance(value, bool))
    ok = real and abs(float(value)) < math.inf if real and not (
        isinstance(value, int) and abs(value) > 10**308) else False
    try:
        got = checked_reward(reward)
    except PacplanError:
        assert not ok
        return
    assert ok and got == float(value) and math.isfinite(got)
