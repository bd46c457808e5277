"""A synthetic world with a known optimum, so ES, executors and pipelines can be tested in seconds.

Environment `seed` moves the goal to θ*_seed = target + shift_seed, shift_seed ~ N(0, shift² I)
drawn from `default_rng(seed)`; the cost is 1 − exp(−‖θ − θ*_seed‖² / scale) ∈ [0, 1].
Because the shift is symmetric, the expected cost over environments is minimized exactly at
`target`, and the expected cost of a Gaussian prior has a closed form (`expected_cost`), which the
tests use as an independent oracle.

Stratum `far` (`strata`): environments whose goal's first weight lies more than one `shift`
above the target's (about 16 % of seeds; none when shift is 0), so stratified ES can be
tested against the plain expected cost in seconds.

`work` adds busy CPU work per rollout so executor speed-ups can be measured on a CPU-bound world.
The cost of one (θ, seed) pair never depends on which other pairs share the call, so results are
bit-identical however the work is chunked.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

import numpy as np

from pacplan.errors import PacplanError
from pacplan.validation import check_int, check_real


class ToyWorld:
    """Smooth cost with a per-seed shifted optimum; cheap, deterministic, optionally CPU-heavy."""

    name = "toy"

    def __init__(
        self,
        dim: int = 8,
        target: float | Sequence[float] | None = None,
        shift: float = 0.3,
        scale: float | None = None,
        work: int = 0,
        crash_on_seed: int | None = None,
    ) -> None:
        opt = "toy world: option"
        self.dim = check_int(dim, f"{opt} dim", minimum=1)
        self.target = _target(target, self.dim)
        self.shift = check_real(shift, f"{opt} shift", minimum=0.0)
        self.scale = float(self.dim) if scale is None else check_real(scale, f"{opt} scale",
                                                                      above=0.0)
        self.work = check_int(work, f"{opt} work", minimum=0)
        # Fault injection for executor tests: the process evaluating this seed dies at once.
        self.crash_on_seed = (None if crash_on_seed is None
                              else check_int(crash_on_seed, f"{opt} crash_on_seed", minimum=0))

    def policy_dim(self) -> int:
        return self.dim

    def optimum(self) -> np.ndarray:
        """The θ minimizing the expected cost over environments (the unshifted target)."""
        return self.target.copy()

    def goal(self, seed: int) -> np.ndarray:
        """θ*_seed: the zero-cost weights of environment `seed`."""
        rng = np.random.default_rng(int(seed))
        return self.target + self.shift * rng.standard_normal(self.dim)

    def strata(self) -> dict[str, str]:
        """The strata this world names (`pacplan.worlds.base.StratifiedWorld`)."""
        return {"far": "the goal's first weight lies more than one shift above the target's"}

    def in_stratum(self, name: str, seeds: np.ndarray) -> np.ndarray:
        """Membership of `seeds` in stratum `name` (`far`), from the goals alone."""
        if name != "far":
            raise PacplanError(f"unknown stratum {name!r} of world 'toy'; its strata: far")
        sd = np.asarray(seeds, dtype=np.int64).reshape(-1)
        if self.shift == 0:
            return np.zeros(sd.size, dtype=bool)
        first = np.array([self.goal(int(s))[0] for s in sd], dtype=np.float64)
        return first - self.target[0] > self.shift

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """(k, d) float32 weights × (n,) seeds -> (n, k) float64 costs in [0, 1]."""
        thetas = np.asarray(thetas)
        seeds = np.asarray(seeds, dtype=np.int64).reshape(-1)
        if thetas.ndim != 2 or thetas.shape[1] != self.dim:
            raise PacplanError(f"toy world: thetas must be (k, {self.dim}), got {thetas.shape}")
        th = thetas.astype(np.float32).astype(np.float64)
        out = np.empty((seeds.size, th.shape[0]), dtype=np.float64)
        for i, seed in enumerate(seeds):
            if self.crash_on_seed is not None and int(seed) == self.crash_on_seed:
                os._exit(17)
            diff = th - self.goal(int(seed))[None, :]
            sq = diff * diff
            # Correctly rounded sums: the value never depends on batch shape or memory alignment.
            for j in range(th.shape[0]):
                out[i, j] = -math.expm1(-math.fsum(sq[j]) / self.scale)
                if self.work:
                    _busy(self.work, int(seed), j)
        return np.clip(out, 0.0, 1.0)

    def expected_cost(self, mu: np.ndarray, var: np.ndarray | float) -> float:
        """Closed-form E_{seed} E_{θ~N(mu, diag var)} cost, the oracle for ES tests.

        Per coordinate x = θ − θ*_seed ~ N(mu − target, var + shift²), and for x ~ N(m, v)
        E exp(−x²/c) = sqrt(c / (c + 2v)) exp(−m² / (c + 2v)).
        """
        mu = np.asarray(mu, dtype=np.float64)
        v = np.broadcast_to(np.asarray(var, dtype=np.float64), mu.shape) + self.shift**2
        c = self.scale
        log_e = 0.5 * np.log(c / (c + 2.0 * v)) - (mu - self.target) ** 2 / (c + 2.0 * v)
        return float(-np.expm1(np.sum(log_e)))

    def min_expected_cost(self) -> float:
        """The infimum of `expected_cost` (mu = target, var -> 0)."""
        return self.expected_cost(self.target, 0.0)


def _target(target: float | Sequence[float] | None, dim: int) -> np.ndarray:
    """The unshifted optimum: linspace(-1, 1) by default, one number for every weight, or `dim`
    numbers."""
    if target is None:
        return np.linspace(-1.0, 1.0, dim)
    if isinstance(target, str) or not isinstance(target, Sequence | np.ndarray):
        return np.full(dim, check_real(target, "toy world: option target"))
    values = [check_real(t, "toy world: option target (each value)") for t in target]
    if len(values) != dim:
        raise PacplanError(f"toy world: option target needs {dim} values, got {len(values)}")
    return np.asarray(values, dtype=np.float64)


def _busy(work: int, seed: int, j: int) -> float:
    """Burn CPU proportional to `work` (numpy on a small vector) without touching the result."""
    x = np.full(64, (seed % 97 + j) * 1e-3)
    for _ in range(work):
        x = np.sin(x) + 1e-3
    return float(x[0])
