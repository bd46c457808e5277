"""Rollout results and the cost formula, shared by both simulators (no torch, no PyBullet)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pacplan.worlds.uav import spec


@dataclass
class RolloutResult:
    """Per (environment, policy): cost, first colliding check (1..240, 0 = none), primitives."""

    costs: np.ndarray  # (n, k) float64
    checks: np.ndarray  # (n, k) int64
    prims: np.ndarray  # (n, k, 12) int64, -1 after the collision


def cost_from_checks(checks: np.ndarray) -> np.ndarray:
    """Cost = 1 − t_c / T with t_c = checks · 0.05 s; 0 when there was no collision.

    Collision times are kept as integer check counts so both simulators' costs compare exactly.
    """
    total = spec.N_STEPS * spec.CHECKS_PER_PRIM
    c = np.asarray(checks, dtype=np.float64)
    return np.where(c > 0, 1.0 - c / total, 0.0)
