"""The single seam between the learning code and the robots: the `World` protocol and a registry.

Worlds are registered by import path so that naming one does not import torch or PyBullet until
it is built, and so that worker processes can rebuild a world from its (name, options) spec.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pacplan.errors import PacplanError


@runtime_checkable
class World(Protocol):
    """A distribution of environments (named by integer seeds) and a cost for policy weights."""

    name: str

    def policy_dim(self) -> int:
        """Number of policy weights d."""
        ...

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """thetas (k, d) float32, seeds (n,) int64 -> (n, k) float64 costs in [0, 1].

        Deterministic: the same inputs give the same outputs.
        """
        ...


_REGISTRY: dict[str, str] = {
    "toy": "pacplan.worlds.toy:ToyWorld",
    "uav": "pacplan.worlds.uav:UAVWorld",
    "quadruped": "pacplan.worlds.quadruped:QuadrupedWorld",
}


def register_world(name: str, target: str) -> None:
    """Register a world factory by import path "package.module:Factory"."""
    _REGISTRY[name] = target


def world_names() -> list[str]:
    return sorted(_REGISTRY)


def make_world(name: str, **options: Any) -> World:
    """Build the world called `name` with keyword options from a config."""
    if name not in _REGISTRY:
        raise PacplanError(f"unknown world {name!r}; known worlds: {', '.join(world_names())}")
    module_name, _, attr = _REGISTRY[name].partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise PacplanError(f"world {name!r} is not available: {exc}") from exc
    return factory(**options)
