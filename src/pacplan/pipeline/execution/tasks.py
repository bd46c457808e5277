"""What every executor shares: the task grid, the world specs and their per-process cache, and
the one function that computes a task (the `Executor` base that cuts a matrix into tasks is
`pacplan.pipeline.execution.executor`).

Below both the serial executor (`pacplan.pipeline.execution.executors`) and the parallel ones
(`pacplan.pipeline.execution.parallel`), so neither imports the other's module to reach them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.validation import check_unit_costs

Block = tuple[np.ndarray, np.ndarray]  # (seeds (n,) int64, thetas (k, d) float32)


class WorkersLost(PacplanError):
    """The machines computing a task were lost (a Ray node or worker died, or the results it
    held), after the executor's own retries. Not a problem of the inputs: every chunk finished
    before was yielded (and a run has kept it), so the same command resumes; `pacplan run`
    says so with the resume command."""


@dataclass(frozen=True)
class WorldSpec:
    """Enough to rebuild a world in any process: registry name and factory options."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        return json.dumps([self.name, self.options], sort_keys=True, default=str)


@dataclass(frozen=True)
class Chunk:
    """One finished block of a cost matrix: rows `seeds`, columns `thetas`, values `block`;
    `cpu_s` the CPU seconds its task took where it ran (`TaskResult`)."""

    seeds: slice
    thetas: slice
    block: np.ndarray
    cpu_s: float = 0.0

    @property
    def key(self) -> tuple[int, int]:
        return (self.seeds.start, self.thetas.start)


@dataclass(frozen=True)
class TaskResult:
    """A task's cost blocks and the CPU seconds computing them took in the process that ran it
    (every thread of that process: a world that walks in threads is counted whole), so a run
    can say what a rollout costs in CPU time on a shared or a remote machine, where wall time
    times workers says little."""

    blocks: list[np.ndarray]
    cpu_s: float


class WorldCache:
    """Worlds built from their specs, each once. A serial executor owns one; each worker
    process owns one (made by its initializer), dropped with the process. No module state."""

    def __init__(self) -> None:
        self._worlds: dict[str, Any] = {}

    def get(self, spec: WorldSpec) -> Any:
        k = spec.key()
        if k not in self._worlds:
            from pacplan.worlds.base import make_world

            self._worlds[k] = make_world(spec.name, **spec.options)
        return self._worlds[k]


def compute_task(world: Any, spec: WorldSpec, blocks: Sequence[Block]) -> TaskResult:
    """The one function every executor runs: cost blocks for a task, validated, with the CPU
    time they took."""
    start = time.process_time()
    out = []
    for seeds, thetas in blocks:
        c, _ = check_unit_costs(world.costs(thetas, seeds),
                                f"world {spec.name!r} on seeds {int(seeds[0])}…{int(seeds[-1])}",
                                shape=(len(seeds), len(thetas)))
        out.append(c)
    return TaskResult(out, time.process_time() - start)


def chunk_grid(n_seeds: int, n_thetas: int, chunk_seeds: int, chunk_policies: int
               ) -> list[tuple[slice, slice]]:
    """The fixed, row-major grid of (seed slice, theta slice) chunks of an n × k matrix."""
    return [
        (slice(i, min(i + chunk_seeds, n_seeds)), slice(j, min(j + chunk_policies, n_thetas)))
        for i in range(0, n_seeds, chunk_seeds)
        for j in range(0, n_thetas, chunk_policies)
    ]
