"""The process-pool executor: a persistent pool of spawned processes (Ray's executor, which
shares its task function and signal rules, is `pacplan.pipeline.execution.ray_executor`).

It runs `compute_task` on the same fixed task grid as the serial executor, so its results are
bit-identical to it. Each worker process keeps its own world cache (made by its initializer, or
on its first Ray task) and never shares it with the driver.

The process pool is the standard library's `concurrent.futures.ProcessPoolExecutor` (spawned
workers, an initializer building each one's world cache). What it cannot do is kept here: the
parent-death guard (`_die_with`, Linux's PR_SET_PDEATHSIG), so a driver killed with SIGKILL
leaves no orphan workers computing; a broken pool dropped and named in one line; and, on
Ctrl-C, the results of the tasks that were running when it came.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from pacplan.errors import PacplanError, one_line_warnings
from pacplan.pipeline.execution.executor import Executor
from pacplan.pipeline.execution.tasks import (
    Block,
    TaskResult,
    WorkersLost,
    WorldCache,
    WorldSpec,
    compute_task,
)

_PROCESS_WORLDS: WorldCache | None = None
"""A worker process's own cache, set by `_worker_init` in that process only (never in the
driver): the worker is owned by one executor and its worlds die with it."""


def _worker_init(parent: int | None = None) -> None:
    """One thread per worker process: parallelism comes from processes, not BLAS/torch threads.

    `parent` (the driver's pid): the worker dies with it, so a killed run leaves no orphans
    computing or blocked on the task queue (which the workers themselves hold open).
    """
    global _PROCESS_WORLDS
    one_line_warnings()  # a world's warning (a sensor fault) reads as the driver's would
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    if parent is not None:
        _die_with(parent)
    _PROCESS_WORLDS = WorldCache()


DRIVER_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def leave_signals_to_the_driver() -> None:
    """A pool worker ignores SIGINT and SIGTERM: its driver decides. `timeout`, schedulers and
    Ctrl-C signal the whole process group, and a worker killed while the driver was writing it
    a task larger than a pipe's buffer (a quadruped task is ~190 kB) hung the pool's shutdown
    for good (CPython gh-94777). The driver unwinds and lets running tasks finish; killed
    outright, it takes its workers along (`_die_with`). Started with both signals blocked
    (`_started_pool`), the worker drops any that came meanwhile, then unblocks them."""
    for signum in DRIVER_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, DRIVER_SIGNALS)


def _started_pool(workers: int, initializer: Any, initargs: tuple[Any, ...] = ()) -> Any:
    """A spawning process pool with its processes started now, SIGINT and SIGTERM blocked, a
    mask each child inherits: a worker still starting cannot die of a group signal before its
    initializer ignores them (the standard library starts its resource tracker so). The driver
    gets a held signal when its mask is restored. Such a pool starts a process per submit while
    none is idle."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"),
                               initializer=initializer, initargs=initargs)
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        return pool
    old = signal.pthread_sigmask(signal.SIG_BLOCK, DRIVER_SIGNALS)
    try:
        for _ in range(workers):
            pool.submit(int)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return pool


def _pool_worker_init(parent: int | None) -> None:
    leave_signals_to_the_driver()
    _worker_init(parent)


@contextlib.contextmanager
def spawned_pool(workers: int) -> Iterator[Any]:
    """Spawned processes for one job list (the distillers'): workers leave signals to the
    driver; leaving early (an error, Ctrl-C, SIGTERM) cancels the jobs not yet started and
    kills the running ones (a teacher's task walks terrains for minutes; its chunk is redone
    on resume, every finished one is kept), so no worker outlives a stopped run."""
    pool = _started_pool(workers, leave_signals_to_the_driver)
    try:
        yield pool
    except BaseException:
        kill_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def kill_workers(pool: Any) -> None:
    """Kill a process pool's workers now (the standard library's own map of them)."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, ValueError):
            process.kill()


STOP_GRACE_S = 5.0
"""On Ctrl-C or SIGTERM, how long running tasks may still finish (their results are kept)
before their worker processes are killed: a run stops within seconds, whatever its user code
does (a policy that never returns included)."""


def _finished_while_stopping(futures: dict[Any, int], given: set[Any], done: Any,
                             grace: float) -> Iterator[tuple[int, TaskResult]]:
    """On Ctrl-C the tasks not started are cancelled, and those that finish within `grace`
    seconds go to the caller, which keeps them; a second Ctrl-C or the deadline ends the
    wait (the caller kills what still runs)."""
    import queue
    import time

    for fut in futures:
        fut.cancel()
    deadline = time.monotonic() + grace
    while any(not f.done() or (f not in given and not f.cancelled()) for f in futures):
        try:
            fut = done.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return
        if fut in given or fut.cancelled():
            continue
        given.add(fut)
        try:
            result = fut.result()
        except Exception:  # a task that failed while stopping: nothing to keep
            continue
        yield futures[fut], result


def _die_with(parent: int) -> None:
    """Ask Linux to SIGKILL this process when its parent exits (prctl PR_SET_PDEATHSIG); exit
    now if the parent is already gone. Elsewhere a no-op: the pool's own shutdown still works."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - no usable libc
        return
    if os.getppid() != parent:  # the driver died before the request took effect
        os._exit(1)


def pool_task(spec: WorldSpec, task: list[Block]) -> TaskResult:
    if _PROCESS_WORLDS is None:  # a Ray worker: no initializer ran in this process
        _worker_init()
    assert _PROCESS_WORLDS is not None
    world = _PROCESS_WORLDS.get(spec)  # build first: the world may import torch
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)  # processes give the parallelism; avoid oversubscription
    return compute_task(world, spec, task)


class ProcessExecutor(Executor):
    """A persistent pool of spawned worker processes; free workers take the next task."""

    kind = "processes"

    def __init__(self, workers: int | None = None, **chunks: int) -> None:
        super().__init__(**chunks)
        self._workers = int(workers or os.cpu_count() or 1)
        if self._workers < 1:
            raise PacplanError("workers must be >= 1")
        self._pool: Any = None

    @property
    def workers(self) -> int:
        return self._workers

    def _ensure_pool(self) -> Any:
        if self._pool is None:
            # Linux ties the death signal to the creating thread: only the main thread's
            # pools (the CLI's) ask for it, so a pool made in a passing thread lives on.
            parent = os.getpid() if threading.current_thread() is threading.main_thread() else None
            self._pool = _started_pool(self._workers, _pool_worker_init, (parent,))
        return self._pool

    def _run(self, spec: WorldSpec, tasks: list[list[Block]]
             ) -> Iterator[tuple[int, TaskResult]]:
        import queue
        from concurrent.futures.process import BrokenProcessPool

        pool = self._ensure_pool()
        futures: dict[Any, int] = {}
        given: set[Any] = set()
        # Finished futures come on a queue: `wait()` takes every future's lock in a Python loop,
        # and a Ctrl-C landing there left locks held that the pool's thread waited on for good.
        done: queue.SimpleQueue[Any] = queue.SimpleQueue()
        try:
            futures = {pool.submit(pool_task, spec, t): i for i, t in enumerate(tasks)}
            for fut in futures:
                fut.add_done_callback(done.put)
            for _ in futures:
                fut = done.get()
                given.add(fut)
                yield futures[fut], fut.result()
        except KeyboardInterrupt:
            try:
                yield from _finished_while_stopping(futures, given, done, STOP_GRACE_S)
            finally:
                if not all(f.done() for f in futures):  # still running: never wait on them
                    self._kill_pool()
            raise
        except BrokenProcessPool as exc:
            self._discard_pool()
            raise WorkersLost(  # `pacplan run` adds the resume command, as for a Ray node
                f"a worker process died while computing costs for world {spec.name!r} "
                f"(crash or out of memory: {exc}); only whole chunks are ever kept"
            ) from None
        finally:
            for fut in futures:
                fut.cancel()

    def _kill_pool(self) -> None:
        """Kill the workers (a task that never returns cannot be waited for) and drop the
        pool; the next task starts a new one."""
        if self._pool is None:
            return
        kill_workers(self._pool)
        self._discard_pool()

    def _discard_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
