"""Every check of user-facing input, in one place (in the manner of scikit-learn's `check_array`).

Each function takes the value and the name it is known by to the user (an argument, a config
field or a file), and either returns the value in canonical form or raises `PacplanError`
naming that thing and the rule it broke. Nothing else in pacplan re-implements these rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pacplan.errors import PacplanError


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """`value` must be one of `choices` (e.g. a bound, solver or executor name)."""
    if value not in choices:
        raise PacplanError(f"unknown {name} {value!r}; choose one of {', '.join(choices)}")
    return str(value)


def check_unit_costs(values: Any, name: str, clip: bool = False,
                     shape: tuple[int, int] | None = None) -> tuple[np.ndarray, int]:
    """A non-empty 2-D matrix of costs in [0, 1] as float64, and how many entries were clipped.

    Outside [0, 1] is an error unless `clip` (then the count is returned, to be recorded).
    `shape`, when given, is the exact shape the caller asked for.
    """
    arr = np.asarray(values)
    if arr.dtype.kind not in "fiub":
        raise PacplanError(f"{name}: costs must be numbers, got dtype {arr.dtype}")
    if shape is not None and arr.shape != shape:
        raise PacplanError(f"{name}: costs have shape {arr.shape}, expected {shape}")
    if arr.ndim != 2:
        raise PacplanError(f"{name}: cost matrix must be 2-D (N environments × m policies), "
                           f"got {arr.ndim}-D shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise PacplanError(f"{name}: cost matrix is empty (shape {arr.shape})")
    arr = arr.astype(np.float64)
    n_nan = int(np.isnan(arr).sum())
    if n_nan:
        raise PacplanError(f"{name}: {n_nan} cost entries are NaN")
    outside = (arr < 0.0) | (arr > 1.0)
    n_out = int(outside.sum())
    if n_out and not clip:
        i, j = np.argwhere(outside)[0]
        raise PacplanError(
            f"{name}: {n_out} costs lie outside [0, 1] (first: {arr[i, j]!r} at row {i}, "
            f"column {j}; min {arr.min():.4g}, max {arr.max():.4g}); "
            "pass --clip to clip them (recorded in the certificate)"
        )
    if n_out:
        arr = np.clip(arr, 0.0, 1.0)
    return arr, n_out


def check_finite(values: Any, name: str) -> np.ndarray:
    """A numeric array with no NaN or infinity."""
    arr = np.asarray(values)
    if arr.dtype.kind not in "fiub":
        raise PacplanError(f"{name}: expected numbers, got dtype {arr.dtype}")
    if not np.isfinite(arr).all():
        raise PacplanError(f"{name}: contains NaN or infinity")
    return arr


def check_policies(thetas: Any, dim: int, name: str = "policy weights") -> np.ndarray:
    """k policies of `dim` finite weights as a contiguous (k, dim) float32 array (1-D → k = 1)."""
    arr = check_finite(thetas, name)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise PacplanError(f"{name}: expected (k, {dim}) weights, got shape {arr.shape}")
    return np.ascontiguousarray(arr, dtype=np.float32)


def check_seeds(seeds: Any, name: str = "environment seeds") -> np.ndarray:
    """Environment seeds as a 1-D int64 array of non-negative integers."""
    arr = np.asarray(seeds).reshape(-1)
    if arr.size and (arr.dtype.kind not in "iu" or arr.min() < 0):
        raise PacplanError(f"{name} must be non-negative integers, got {arr.dtype} "
                           f"{arr[:3].tolist()}…")
    return np.ascontiguousarray(arr, dtype=np.int64)


def _float_array(name: str, value: Any) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if np.isnan(arr).any():
        raise PacplanError(f"{name} is NaN")
    return arr


def check_delta(delta: Any) -> np.ndarray:
    """δ must lie in the open interval (0, 1)."""
    d = _float_array("delta", delta)
    if np.any((d <= 0.0) | (d >= 1.0)):
        raise PacplanError(f"delta must lie in (0, 1), got {delta}")
    return d


def check_n(n: Any) -> np.ndarray:
    """N, the number of certification environments, must be a positive integer."""
    arr = np.asarray(n)
    if arr.dtype.kind not in "iuf" or np.any(arr < 1) or np.any(np.asarray(arr) != np.floor(arr)):
        raise PacplanError(f"N (number of environments) must be an integer ≥ 1, got {n}")
    return arr.astype(np.float64)


def check_emp_cost(emp: Any) -> np.ndarray:
    """The empirical cost Ĉ must lie in [0, 1]."""
    e = _float_array("empirical cost", emp)
    if np.any((e < 0.0) | (e > 1.0)):
        raise PacplanError(f"empirical cost must lie in [0, 1], got {emp}")
    return e


def check_kl(kl: Any) -> np.ndarray:
    """KL(p‖p0) must be non-negative (tiny negative round-off from a solver is clipped to 0)."""
    k = _float_array("KL", kl)
    if np.any(k < -1e-12):
        raise PacplanError(f"KL divergence must be ≥ 0, got {kl}")
    return np.maximum(k, 0.0)


def check_kl_budget(c: Any) -> np.ndarray:
    """The right-hand side c of kl(q‖p) ≤ c must be ≥ 0."""
    arr = _float_array("kl budget", c)
    if np.any(arr < 0):
        raise PacplanError(f"kl budget must be ≥ 0, got {c}")
    return arr


def check_probability_vector(p0: Any, m: int, name: str = "prior p0") -> np.ndarray:
    """A probability vector of length m (non-negative, sums to 1)."""
    arr = np.asarray(p0, dtype=np.float64)
    if arr.shape != (m,) or np.any(arr < 0) or not np.isclose(arr.sum(), 1.0):
        raise PacplanError(f"{name} must be a probability vector of length {m}")
    return arr
