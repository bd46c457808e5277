"""A stopped distillation leaves no worker behind: its pool kills the running tasks.

A teacher's task walks terrains for minutes; before, a SIGTERM'd `train-prior` exited while its
spawned workers kept walking (found by killing a PyBullet teacher run: both workers ran on,
orphaned, for 12 minutes).
"""

from __future__ import annotations

import time

import pytest

from pacplan.pipeline.execution.parallel import spawned_pool

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


def test_leaving_a_spawned_pool_early_kills_its_running_workers() -> None:
    with pytest.raises(KeyboardInterrupt), spawned_pool(2) as pool:
        futures = [pool.submit(time.sleep, 120) for _ in range(2)]
        processes = list(pool._processes.values())
        assert len(processes) == 2
        time.sleep(0.5)
        t0 = time.monotonic()
        raise KeyboardInterrupt
    assert time.monotonic() - t0 < 30, "the pool waited for its running tasks"
    for process in processes:
        process.join(timeout=10)
        assert not process.is_alive()
    assert all(f.done() for f in futures)
