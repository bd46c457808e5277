"""The UAV dynamics core: one transition for ints, numpy and torch; positions exact on the grid.

Oracles: the continuous primitive curves of `primitives` (accumulated end displacements) and
hand-worked collision times, not the functions under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import primitives as prims
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.batched import BatchedSimulator

RIGHT_UP = 23  # dx = +1 m, dz = +0.5 m: grid step (+2, +1)
STRAIGHT = 12


def test_transition_advances_collides_then_stops() -> None:
    s0 = dyn.initial()
    s1 = dyn.transition(s0, RIGHT_UP, 0)
    assert (s1.step, s1.ix, s1.iz, s1.checks) == (1, 2, 1, 0)
    assert s1.alive and not dyn.terminal(s1) and dyn.reward(s0, s1) == 0.0
    s2 = dyn.transition(s1, STRAIGHT, 7)  # hits at check 7 of the second primitive
    assert s2.checks == 27 and not s2.alive and dyn.terminal(s2)
    assert dyn.reward(s1, s2) == -(1 - 27 * spec.CHECK_DT / spec.HORIZON)
    s3 = dyn.transition(s2, 0, 3)  # a collided robot no longer moves or re-collides
    assert (s3.ix, s3.iz, s3.checks) == (s2.ix, s2.iz, s2.checks)
    np.testing.assert_array_equal(
        dyn.stop_position(s1, STRAIGHT, 7),
        dyn.position(s1) + prims.displacement(STRAIGHT, prims.check_times()[6]),
    )


def test_horizon_ends_a_collision_free_flight() -> None:
    state = dyn.initial()
    for _ in range(spec.N_STEPS):
        assert not dyn.terminal(state)
        state = dyn.transition(state, STRAIGHT, 0)
    assert dyn.terminal(state) and state.alive and float(dyn.cost(state)) == 0.0


def test_same_transition_for_ints_numpy_and_torch() -> None:
    rng = np.random.default_rng(0)
    n = 200
    step = 4
    ix, iz = rng.integers(-6, 7, n), rng.integers(-3, 4, n)
    checks = np.where(rng.random(n) < 0.3, rng.integers(1, 80, n), 0)  # some already collided
    prim, first = rng.integers(0, 25, n), np.where(rng.random(n) < 0.4, rng.integers(1, 21, n), 0)
    arr = dyn.transition(dyn.GridState(step, ix, iz, checks), prim, first)
    ten = dyn.transition(
        dyn.GridState(step, *map(torch.as_tensor, (ix, iz, checks))),
        torch.as_tensor(prim),
        torch.as_tensor(first),
    )
    for i in range(n):
        one = dyn.transition(
            dyn.GridState(step, int(ix[i]), int(iz[i]), int(checks[i])), int(prim[i]), int(first[i])
        )
        got = [(int(a.ix[i]), int(a.iz[i]), int(a.checks[i])) for a in (arr, ten)]
        assert got == [(one.ix, one.iz, one.checks)] * 2
    hit = (checks == 0) & (first > 0)
    np.testing.assert_array_equal(arr.checks[hit], step * 20 + first[hit])


def test_grid_positions_are_the_flown_curves_exactly() -> None:
    """After any sequence, the grid position equals the start plus the primitives' continuous
    end displacements, to the bit; the batched simulator's torch positions are the same."""
    seq = np.random.default_rng(1).integers(0, 25, spec.N_STEPS)
    state, pos = dyn.initial(), np.array(spec.START, dtype=np.float64)
    sim = BatchedSimulator()
    for prim in seq:
        np.testing.assert_array_equal(dyn.position(state), pos)
        ours = sim.positions(state.step, torch.tensor([state.ix]), torch.tensor([state.iz]))
        np.testing.assert_array_equal(ours.numpy()[0], pos)
        pos = pos + prims.displacement(int(prim), 1.0)
        state = dyn.transition(state, int(prim), 0)
    np.testing.assert_array_equal(dyn.position(state), pos)
    assert pos[1] == pytest.approx(spec.N_STEPS * spec.SPEED)


def test_flight_stops_at_the_colliding_check() -> None:
    seq = np.array([RIGHT_UP, STRAIGHT, 2, -1, -1])
    decisions, points = dyn.flight(seq, checks=47)  # check 7 of the third primitive
    assert decisions.shape == (3, 3) and points.shape == (48, 3)
    s2 = dyn.transition(dyn.transition(dyn.initial(), RIGHT_UP, 0), STRAIGHT, 0)
    np.testing.assert_array_equal(decisions[2], dyn.position(s2))
    np.testing.assert_array_equal(points[-1], dyn.stop_position(s2, 2, 7))
    decisions, points = dyn.flight(seq[:3])
    assert decisions.shape == (3, 3) and points.shape == (61, 3)
