"""Run rollout tasks serially, on a persistent process pool, or on Ray — with identical results.

Work is cut into tasks by a fixed grid that depends only on the chunk sizes (never on the executor
kind or the number of workers), and every task is computed by the same function, so all three
executors return bit-identical results. A task is a list of blocks (seeds, thetas): the world's
cost matrix of those thetas on those seeds. Workers rebuild the world from its (name, options)
spec once per process and keep it for the life of that process (or of the serial executor).

Two callers:

- ES (`paired_costs`): each environment has its own perturbed weights.
- The pipeline (`iter_chunks`, `cost_matrix`): a full seeds × policies matrix built chunk by chunk;
  `iter_chunks` yields each finished chunk as it completes so it can be persisted, and skips
  chunks already done, so a killed run resumes without recomputation.

The parallel executors live in `pacplan.pipeline.execution.parallel` and
`pacplan.pipeline.execution.ray_executor`; what all three share is below them: the task grid,
`WorldSpec` and `compute_task` in `pacplan.pipeline.execution.tasks`, the `Executor` base in
`pacplan.pipeline.execution.executor`. The process pool uses the "spawn" start method (safe with
torch, PyBullet and Ray threads), so a script that uses it must guard its entry point with
`if __name__ == "__main__":`.
"""

from __future__ import annotations

from collections.abc import Iterator

from pacplan.choices import EXECUTORS
from pacplan.config import ExecutorConfig
from pacplan.pipeline.execution.executor import Executor
from pacplan.pipeline.execution.parallel import ProcessExecutor
from pacplan.pipeline.execution.ray_executor import RayExecutor
from pacplan.pipeline.execution.tasks import (
    Block,
    Chunk,
    TaskResult,
    WorkersLost,
    WorldCache,
    WorldSpec,
    chunk_grid,
    compute_task,
)
from pacplan.validation import check_choice

# the shared pieces are part of this module's interface too, where callers have always found them
__all__ = ["Block", "Chunk", "Executor", "ProcessExecutor", "RayExecutor", "SerialExecutor",
           "TaskResult", "WorkersLost", "WorldCache", "WorldSpec", "chunk_grid", "compute_task",
           "executor_from_config", "make_executor"]


class SerialExecutor(Executor):
    """In-process, in task order: the reference every other executor must match."""

    kind = "serial"

    def __init__(self, **chunks: int) -> None:
        super().__init__(**chunks)
        self._worlds = WorldCache()

    def _run(self, spec: WorldSpec, tasks: list[list[Block]]
             ) -> Iterator[tuple[int, TaskResult]]:
        world = self._worlds.get(spec)
        for i, task in enumerate(tasks):
            yield i, compute_task(world, spec, task)


def make_executor(
    kind: str = "serial",
    workers: int | None = None,
    address: str | None = None,
    chunk_policies: int = 64,
    chunk_seeds: int = 8,
) -> Executor:
    """Build an executor by name; chunk sizes (not kind or workers) determine the task grid."""
    chunks = {"chunk_policies": chunk_policies, "chunk_seeds": chunk_seeds}
    if kind == "serial":
        return SerialExecutor(**chunks)
    if kind == "processes":
        return ProcessExecutor(workers=workers, **chunks)
    check_choice("executor", kind, EXECUTORS)
    return RayExecutor(workers=workers, address=address, **chunks)


def executor_from_config(cfg: ExecutorConfig) -> Executor:
    """Build from an `ExecutorConfig` (pacplan.config)."""
    return make_executor(cfg.kind, cfg.workers, cfg.address, cfg.chunk_policies, cfg.chunk_seeds)
