"""Worlds that misbehave, for tests/worlds/test_check_world_limits.py (importable by make_world)."""

from __future__ import annotations

import sys
import time

import numpy as np

from pacplan.worlds.base import World


class _Base(World):
    name = "misbehaving"

    def policy_dim(self) -> int:
        return 2


class Hangs(_Base):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        time.sleep(3600)
        raise AssertionError("unreachable")


class Exits(_Base):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        sys.exit(3)


class Prints(_Base):
    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        print("hello from the world")
        sys.stdout.write("{not json\n")
        return np.full((len(seeds), len(thetas)), 0.25)
