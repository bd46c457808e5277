"""Observation normalization statistics (Stable-Baselines3's VecNormalize) read without a
pickle, applied to every observation before a policy sees it.

SB3 saves VecNormalize as a pickle, which pacplan never loads. The user converts it once, in
their own environment where they already trust it, to an `.npz` of plain arrays (`mean`,
`var`, `clip_obs`, `epsilon`; docs/certify-policy.md shows the three lines), read here with
numpy's `allow_pickle=False`. An observation becomes exactly what SB3's
`VecNormalize.normalize_obs` gives: clip((obs − mean) / sqrt(var + epsilon), ±clip_obs) as
float32.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError
from pacplan.io.files import npz_arrays, read_file_bytes, sha256_bytes
from pacplan.policy_certification.policies import ImportedPolicy

KEYS = ("mean", "var", "clip_obs", "epsilon")


@dataclasses.dataclass(frozen=True)
class ObsNormalization:
    """VecNormalize's observation statistics, from the file whose sha256 is recorded."""

    path: str
    sha256: str
    mean: np.ndarray
    var: np.ndarray
    clip_obs: float
    epsilon: float

    def record(self) -> dict[str, Any]:
        return {"file": Path(self.path).name, "sha256": self.sha256}

    def __call__(self, obs: Any) -> np.ndarray:
        x = np.asarray(obs)
        scaled = np.clip((x - self.mean) / np.sqrt(self.var + self.epsilon), -self.clip_obs,
                         self.clip_obs)
        return scaled.astype(np.float32)


def read_obs_normalization(path: str | Path, observation_space: spaces.Space,
                           what: str = "obs_normalization") -> ObsNormalization:
    """The statistics in `path` (an .npz of KEYS), checked against the observation space."""
    data = read_file_bytes(path, f"{what} {path}")
    if not isinstance(observation_space, spaces.Box):
        raise PacplanError(f"{what} {path}: VecNormalize normalizes Box observations; the "
                           f"environment's are {observation_space}")
    if data[:6] == b"\x93NUMPY":
        raise PacplanError(f"{what} {path} is one .npy array; the statistics are an .npz of "
                           f"{', '.join(KEYS)} (docs/certify-policy.md shows the conversion)")
    # mean and var hold one number per observation value: nothing larger is inflated
    largest = 16 * max(1, math.prod(observation_space.shape))
    arrays = npz_arrays(data, str(path), KEYS, "VecNormalize statistics (.npz of mean, var, "
                        "clip_obs, epsilon)", max_bytes=largest,
                        hint="convert the statistics again (docs/certify-policy.md)")
    for key in ("mean", "var"):
        if arrays[key].dtype.kind != "f":
            raise PacplanError(f"{what} {path}: {key} must be real floating-point numbers, got "
                               f"an array of {arrays[key].dtype}")
    mean, var = (np.asarray(arrays[k], dtype=np.float64) for k in ("mean", "var"))
    if mean.shape != observation_space.shape or var.shape != observation_space.shape:
        raise PacplanError(f"{what} {path}: mean {mean.shape} and var {var.shape} must have the "
                           f"observations' shape {observation_space.shape}")
    scalars = {}
    for key in ("clip_obs", "epsilon"):
        value = np.asarray(arrays[key])
        if value.shape != () or value.dtype.kind not in "iuf":
            raise PacplanError(f"{what} {path}: {key} must be one real number, got "
                               f"{value.dtype} of shape {value.shape}")
        scalars[key] = float(value)
    if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var > 0).all()
            and all(math.isfinite(v) and v > 0 for v in scalars.values())):
        raise PacplanError(f"{what} {path}: mean and var must be finite (var > 0), clip_obs "
                           "and epsilon finite and > 0")
    return ObsNormalization(str(path), sha256_bytes(data), mean, var, scalars["clip_obs"],
                            scalars["epsilon"])


def normalized(loaded: list[ImportedPolicy], norm: ObsNormalization) -> list[ImportedPolicy]:
    """Each policy acting on normalized observations (the kind says so)."""
    def wrap(p: ImportedPolicy) -> ImportedPolicy:
        return dataclasses.replace(p, act=lambda obs, act=p.act: act(norm(obs)))

    return [wrap(p) for p in loaded]
