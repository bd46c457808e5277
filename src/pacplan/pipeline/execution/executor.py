"""The `Executor` base every executor subclasses (serial, process pool, Ray): the chunk grid of
a cost matrix cut into tasks, the inputs checked once, and chunks yielded as they finish
(`iter_chunks`, `run_blocks`, `cost_matrix`, `paired_costs`). A subclass implements `_run`.

What a task is and how one is computed is `pacplan.pipeline.execution.tasks`, below this.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from pacplan.errors import PacplanError
from pacplan.pipeline.execution.tasks import Block, Chunk, TaskResult, WorldSpec, chunk_grid
from pacplan.validation import check_finite, check_seeds


def _check_inputs(thetas: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    thetas = check_finite(thetas, "policy weights")
    return np.ascontiguousarray(thetas, dtype=np.float32), check_seeds(seeds)


class Executor:
    """Base: subclasses implement `_run`, yielding (task index, result) as tasks finish."""

    kind = "base"

    def __init__(self, chunk_policies: int = 64, chunk_seeds: int = 8) -> None:
        if chunk_policies < 1 or chunk_seeds < 1:
            raise PacplanError("chunk_policies and chunk_seeds must be >= 1")
        self.chunk_policies = int(chunk_policies)
        self.chunk_seeds = int(chunk_seeds)

    @property
    def workers(self) -> int:
        return 1

    def _run(self, spec: WorldSpec, tasks: list[list[Block]]
             ) -> Iterator[tuple[int, TaskResult]]:
        raise NotImplementedError

    def close(self) -> None:
        """Release workers; the executor may not be used afterwards."""

    def placement(self) -> str | None:
        """Where the tasks so far ran, for a log line (Ray: tasks per node), or None."""
        return None

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the public API -------------------------------------------------------------------------
    def iter_chunks(
        self,
        spec: WorldSpec,
        thetas: np.ndarray,
        seeds: np.ndarray,
        skip: Iterable[tuple[int, int]] = (),
    ) -> Iterator[Chunk]:
        """Yield every chunk of the (n_seeds × k) cost matrix not in `skip`, as each finishes.

        Chunk keys are (seed start, theta start) on the grid `chunk_grid`; a crashed worker
        raises `PacplanError` and no unfinished chunk is ever yielded.
        """
        thetas, seeds = _check_inputs(thetas, seeds)
        done = set(skip)
        grid = [g for g in chunk_grid(len(seeds), len(thetas), self.chunk_seeds,
                                      self.chunk_policies)
                if (g[0].start, g[1].start) not in done]
        tasks = [[(seeds[s], thetas[t])] for s, t in grid]
        for idx, result in self._run(spec, tasks):
            s, t = grid[idx]
            yield Chunk(seeds=s, thetas=t, block=result.blocks[0], cpu_s=result.cpu_s)

    def run_blocks(self, spec: WorldSpec, blocks: Sequence[Block]
                   ) -> Iterator[tuple[int, np.ndarray]]:
        """(index, costs) of each (seeds, thetas) block, one task each, as each finishes: for a
        caller that keeps its own grid (`pacplan certify-policy`'s seed-offset chunks)."""
        checked = [_check_inputs(thetas, seeds)[::-1] for seeds, thetas in blocks]
        for idx, result in self._run(spec, [[b] for b in checked]):
            yield idx, result.blocks[0]

    def cost_matrix(self, spec: WorldSpec, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """Costs (n_seeds, k) of every theta on every seed."""
        thetas, seeds = _check_inputs(thetas, seeds)
        out = np.empty((len(seeds), len(thetas)), dtype=np.float64)
        for ch in self.iter_chunks(spec, thetas, seeds):
            out[ch.seeds, ch.thetas] = ch.block
        return out

    def paired_costs(self, spec: WorldSpec, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """Costs (n, k): thetas[i] (k, d) evaluated on seeds[i] only (ES's per-env perturbations).

        Tasks group `chunk_seeds` environments, each with up to `chunk_policies` of its thetas.
        """
        thetas, seeds = _check_inputs(thetas, seeds)
        if thetas.ndim != 3 or thetas.shape[0] != len(seeds):
            raise PacplanError(f"paired thetas must be (n_seeds, k, d), got {thetas.shape}")
        n, k = thetas.shape[:2]
        grid = chunk_grid(n, k, self.chunk_seeds, self.chunk_policies)
        tasks = [[(seeds[i : i + 1], thetas[i, t]) for i in range(s.start, s.stop)]
                 for s, t in grid]
        out = np.empty((n, k), dtype=np.float64)
        for idx, result in self._run(spec, tasks):
            s, t = grid[idx]
            for i, row in zip(range(s.start, s.stop), result.blocks, strict=True):
                out[i, t] = row[0]
        return out
