"""UAV dynamics, written once: the robot's state on its integer grid and pure functions of it.

Shaped like Gymnasium's functional env (initial / transition / reward / terminal, state passed
explicitly). The batched simulator, the Gymnasium env, the PyBullet rollouts and the trajectory
figures all step through these functions; what a simulator adds is geometry only: the depth image
at a position and the first colliding check of a primitive (`first`), which `transition` takes
as an input.

State fields may be Python ints, numpy arrays or torch tensors: `transition`, `terminal` and
`grid_coords` use operators only, so one definition serves the per-scene loops (ints) and the
batched simulator ((n, k) tensors, with `step` a shared int). Positions are exact: every grid
coordinate is a multiple of 0.25 m, so no order of additions can change a bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pacplan.worlds.uav import primitives as prims
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.results import cost_from_checks

CHECK_DISP = prims.check_displacements()
"""(25, 20, 3) offsets of every primitive's collision checks from its start (read-only)."""
CHECK_DISP.flags.writeable = False

FORWARD_PER_STEP = spec.SPEED * spec.PRIM_DURATION
"""Metres flown forward by one primitive (every primitive has the same forward speed)."""


@dataclass(frozen=True)
class GridState:
    """Where the robot is after `step` primitives: grid cell (ix, iz) in 0.5 m units from the
    start, and `checks`, the global index (1..240) of the first colliding check, 0 while flying.

    Integers so that equal states compare equal (the batched simulator deduplicates on them) and
    positions never accumulate rounding. A state that collided is terminal; its cell is the end
    of the primitive it collided in (where it really stopped is `stop_position`).
    """

    step: Any
    ix: Any
    iz: Any
    checks: Any

    @property
    def alive(self) -> Any:
        """Not collided yet (the horizon is a separate condition: see `terminal`)."""
        return self.checks == 0


def initial(zeros: Any = 0) -> GridState:
    """The start: step 0, cell (0, 0), no collision; `zeros` gives the batch (int 0 = one robot).

    Sharing `zeros` between fields is safe because nothing updates a state in place.
    """
    return GridState(0, zeros, zeros, zeros)


def transition(state: GridState, prim: Any, first: Any) -> GridState:
    """The state after flying primitive `prim` from `state`, given the primitive's first colliding
    check `first` (1..20, 0 = none), which the simulator's geometry decides.

    Living robots advance one grid step and, if `first` > 0, record the collision time as a
    global check index; robots that already collided keep their cell and collision time (their
    `prim` and `first` are ignored; only the step counter moves on).
    """
    live = state.alive
    dix, diz = prims.grid_step(prim)
    hit = live & (first > 0)
    return GridState(
        state.step + 1,
        state.ix + dix * live,
        state.iz + diz * live,
        state.checks + hit * (state.step * spec.CHECKS_PER_PRIM + first),
    )


def terminal(state: GridState) -> Any:
    """The episode is over: collided, or all 12 primitives flown."""
    return (state.checks > 0) | (state.step >= spec.N_STEPS)


def cost(state: GridState) -> np.ndarray:
    """1 − t_c / T for a collided state, 0 otherwise (`results.cost_from_checks`)."""
    return cost_from_checks(state.checks)


def reward(state: GridState, next_state: GridState) -> float:
    """Minus the cost incurred by a transition, so an episode's return is minus its cost."""
    return float(cost(state) - cost(next_state))


def grid_coords(step: Any, ix: Any, iz: Any) -> tuple[Any, Any, Any]:
    """World (x, y, z) of grid cell (ix, iz) after `step` primitives; the one position formula.

    Elementwise on ints, numpy arrays or torch tensors (pass float64 for float64 results).
    """
    return (
        spec.START[0] + spec.GRID * ix,
        spec.START[1] + FORWARD_PER_STEP * step,
        spec.START[2] + spec.GRID * iz,
    )


def grid_to_position(step: Any, ix: Any, iz: Any) -> np.ndarray:
    """World positions (..., 3) float64 of grid states (numpy; see `grid_coords`)."""
    as64 = [np.asarray(v, dtype=np.float64) for v in (step, ix, iz)]
    return np.stack(np.broadcast_arrays(*grid_coords(*as64)), axis=-1)


def position(state: GridState) -> np.ndarray:
    """Where a living robot is: the world position of its grid state."""
    return grid_to_position(state.step, state.ix, state.iz)


def check_points(state: GridState, prim: int) -> np.ndarray:
    """(20, 3) robot positions at the collision checks of primitive `prim` flown from `state`."""
    return position(state) + CHECK_DISP[prim]


def stop_position(state: GridState, prim: int, first: int) -> np.ndarray:
    """Where the robot is after flying `prim` from `state`: at its first colliding check `first`,
    or at the primitive's end when `first` is 0."""
    return check_points(state, prim)[(first or spec.CHECKS_PER_PRIM) - 1]


def first_in_step(checks: int, step: int) -> int:
    """The colliding check within primitive `step` (1..20) for a rollout's global `checks`,
    0 if the rollout did not collide during that primitive."""
    if checks and (checks - 1) // spec.CHECKS_PER_PRIM == step:
        return checks - step * spec.CHECKS_PER_PRIM
    return 0


def flight(seq: np.ndarray, checks: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Replay a recorded rollout's primitives (-1 = none) with its collision time `checks`.

    Returns (decisions (S, 3): where each primitive was chosen, points (M, 3): the start and
    every check position flown, up to and including the colliding one).
    """
    state = initial()
    decisions, points = [], [position(state)]
    for prim in np.asarray(seq):
        if prim < 0 or terminal(state):
            break
        first = first_in_step(checks, state.step)
        decisions.append(position(state))
        points.extend(check_points(state, prim)[: first or spec.CHECKS_PER_PRIM])
        state = transition(state, int(prim), first)
    return np.array(decisions).reshape(-1, 3), np.array(points)
