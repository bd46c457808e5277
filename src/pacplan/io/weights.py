"""Reading one policy's weights from a user file: .npy (never unpickled) or .safetensors.

Shared by every world's renderer and by anything that takes `--theta FILE`. A .safetensors file
may hold a tensor named `theta`, a prior (`mu`, taken as the policy), or a single tensor; a 2-D
array (several policies, e.g. a run's policies.npy) gives its first row.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.files import load_npy
from pacplan.validation import check_finite


def load_theta(path: str | Path, dim: int, world: str = "policy", exact: bool = False
               ) -> np.ndarray:
    """A flat float32 θ of `dim` finite weights, or a `PacplanError` naming the problem;
    `exact`: float64 as stored, never rounded (where ES starts: its state is float64)."""
    path = Path(path)
    if not path.is_file():
        raise PacplanError(f"no such policy file: {path}")
    if path.suffix == ".npy":
        arr = load_npy(path)
    elif path.suffix == ".safetensors":
        from safetensors.numpy import load_file

        try:
            tensors = load_file(str(path))
        except Exception as exc:
            raise PacplanError(f"{path}: unreadable safetensors file ({exc})") from None
        key = next((k for k in ("theta", "mu") if k in tensors), None)
        if key is None and len(tensors) == 1:
            key = next(iter(tensors))
        if key is None:
            raise PacplanError(f"{path}: expected a tensor named theta or mu, "
                               f"found {sorted(tensors)}")
        arr = tensors[key]
    else:
        raise PacplanError(f"{path}: policy weights must be .npy or .safetensors")
    arr = check_finite(arr, f"{path}")
    if arr.ndim == 2:
        arr = arr[0]
    if arr.shape != (dim,):
        raise PacplanError(f"{path}: expected {dim} {world} weights, got shape {arr.shape}")
    return arr.astype(np.float64 if exact else np.float32)
