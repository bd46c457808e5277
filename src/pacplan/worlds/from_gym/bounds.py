"""`return_bounds` for a Gymnasium env from per-step reward bounds, so a continuous-reward env
(Pendulum-v1) needs no hand arithmetic.

An episode of L steps, 1 ≤ L ≤ horizon, each reward in [r_lo, r_hi], has a return in
[L·r_lo, L·r_hi]; over every L that is [min(r_lo, H·r_lo), max(r_hi, H·r_hi)]. The per-step
bounds come from the user (`reward_bounds`, e.g. Pendulum's −(π² + 0.1·8² + 0.001·2²) ≤ r ≤ 0)
or from the env itself where it declares a finite `reward_range` (Gymnasium < 1.0 and custom
envs; Gymnasium 1.x dropped the attribute). Either way they must be true bounds: a return
outside the derived range is an error, never clipped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pacplan.errors import PacplanError
from pacplan.validation import check_int, check_real


def return_bounds_from_rewards(reward_bounds: Sequence[float], horizon: int,
                               what: str = "reward_bounds",
                               pair: str = "[r_min, r_max]") -> tuple[float, float]:
    """[R_min, R_max] of an episode of at most `horizon` steps whose rewards lie in
    `reward_bounds` = [r_lo, r_hi] (an episode may end after any step); errors name them
    `what`, written as `pair`."""
    if not isinstance(reward_bounds, list | tuple) or len(reward_bounds) != 2:
        raise PacplanError(f"{what} must be {pair} per step, got {reward_bounds!r}")
    lo, hi = (check_real(b, what) for b in reward_bounds)
    h = check_int(horizon, "horizon", minimum=1)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise PacplanError(f"{what} must be finite with r_min ≤ r_max, got [{lo}, {hi}]")
    r_min, r_max = min(lo, h * lo), max(hi, h * hi)
    if not math.isfinite(r_max - r_min):  # every cost (R_max − R)/∞ would be 0
        raise PacplanError(f"{what} [{lo}, {hi}] over {h} steps give returns that span more "
                           "than a float holds: every cost would be 0; declare tighter bounds")
    if not r_min < r_max:
        raise PacplanError(f"{what} [{lo}, {hi}] over {h} steps gives one return; "
                           "the cost would be undefined")
    return float(r_min), float(r_max)


def declared_reward_range(env: Any) -> tuple[float, float] | None:
    """The env's own finite per-step `reward_range`, or None where it declares none."""
    declared = getattr(getattr(env, "unwrapped", env), "reward_range", None)
    if declared is None or len(declared) != 2:
        return None
    lo, hi = (float(v) for v in declared)
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) and lo <= hi else None
