"""The Ray executor: Ray tasks on a local Ray instance (always a new one) or a cluster.

It runs the process pool's task function (`pacplan.pipeline.execution.parallel.pool_task`) on the
same fixed task grid as the serial executor, so its results are bit-identical to it. A Ray cluster
address is checked before `ray.init` (`pacplan.pipeline.execution.ray_address`). Ray's own INFO
lines stay out of pacplan's output (workers' logs are not sent to the driver, the driver's Ray
logger says warnings only); instead each task reports its node, and `placement()` counts tasks per
node. Stopping (Ctrl-C, SIGTERM to the process group) is pacplan's: Ray's processes start shielded
from group signals, its driver handler is replaced by pacplan's, running tasks are cancelled by
force, and Ray is shut down.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

from pacplan.errors import PacplanError
from pacplan.pipeline.execution.executor import Executor
from pacplan.pipeline.execution.parallel import DRIVER_SIGNALS, pool_task
from pacplan.pipeline.execution.ray_address import RAY_CONNECT_TIMEOUT_S, check_ray_address
from pacplan.pipeline.execution.tasks import Block, TaskResult, WorkersLost, WorldSpec


@contextlib.contextmanager
def _signals_kept() -> Iterator[None]:
    """Ray's core installs its own SIGTERM handler in the driver, which aborts the process
    with a core-dump message; pacplan's (SIGTERM as Ctrl-C: unwind, keep finished chunks) is
    put back once Ray has started."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    kept = {signum: signal.getsignal(signum) for signum in DRIVER_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in kept.items():
            if handler is not None:
                signal.signal(signum, handler)


@contextlib.contextmanager
def _group_signals_blocked() -> Iterator[None]:
    """SIGINT and SIGTERM blocked while Ray starts its processes, a mask they inherit: a
    signal to the whole process group (Ctrl-C, `timeout`, a scheduler) reaches the driver,
    which cancels its tasks and shuts Ray down, instead of killing Ray's daemons under it."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, DRIVER_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _ray_task(spec: WorldSpec, task: list[Block]) -> tuple[str, TaskResult]:
    """The task's blocks and the node it ran on (its IP address), for `placement()`."""
    import ray.util

    return ray.util.get_node_ip_address(), pool_task(spec, task)


_LOST = (("NodeDiedError", "a Ray node died"),
         ("LocalRayletDiedError", "this machine's Ray node died"),
         ("OutOfMemoryError", "Ray killed a worker for memory"),
         ("WorkerCrashedError", "a Ray worker process died"),
         ("RayActorError", "a Ray worker process died"),
         ("ObjectLostError", "a task's result was lost with the node that held it"))
"""Ray's error types (by class name, subclasses included) in words, first match first."""


def _lost_line(exc: BaseException, spec: WorldSpec) -> str:
    """What Ray lost, in words, with Ray's own error type and first line."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    what = next((text for name, text in _LOST if name in names), "the Ray cluster failed")
    detail = " ".join((str(exc).strip().splitlines() or [""])[0].split())[:200]
    return (f"{what} while computing costs for world {spec.name!r} ({type(exc).__name__}"
            f"{': ' + detail if detail else ''}); Ray's retries did not recover it")


class RayExecutor(Executor):
    """Ray tasks on a local Ray (started with `workers` CPUs) or an existing cluster (`address`)."""

    kind = "ray"

    def __init__(self, workers: int | None = None, address: str | None = None,
                 **chunks: int) -> None:
        super().__init__(**chunks)
        try:
            import ray
        except ImportError as exc:
            raise PacplanError(
                "the ray executor needs Ray: pip install 'pacplan[ray]'"
            ) from exc
        self._ray = ray
        self._started = False
        self._per_node: Counter[str] = Counter()
        if not ray.is_initialized():
            if address:
                check_ray_address(address, RAY_CONNECT_TIMEOUT_S)
            try:
                with _signals_kept(), _group_signals_blocked():
                    self._init(ray, workers, address)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                where = f"cluster at {address}" if address else "a local Ray instance"
                first_line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise PacplanError(f"could not connect to {where}: {first_line}") from None
            self._started = True
        self._fn = ray.remote(num_cpus=1)(_ray_task)

    @staticmethod
    def _init(ray: Any, workers: int | None, address: str | None) -> None:
        if address:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
        else:  # "local": always a new instance, never one a killed driver left behind
            ray.init(address="local", num_cpus=int(workers or os.cpu_count() or 1),
                     log_to_driver=False, include_dashboard=False,
                     logging_level=logging.WARNING)

    @property
    def workers(self) -> int:
        return max(1, int(self._ray.cluster_resources().get("CPU", 1)))

    def _run(self, spec: WorldSpec, tasks: list[list[Block]]
             ) -> Iterator[tuple[int, TaskResult]]:
        ray = self._ray
        pending: list[Any] = []
        try:
            spec_ref = ray.put(spec)
            refs = {self._fn.remote(spec_ref, t): i for i, t in enumerate(tasks)}
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for ref in ready:
                    try:
                        node, result = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        cause = getattr(exc, "cause", None)
                        if isinstance(cause, PacplanError):
                            raise PacplanError(str(cause)) from None
                        raise
                    self._per_node[node] += 1
                    yield refs[ref], result
        except ray.exceptions.RayTaskError:
            raise  # the task's own code failed: its traceback is the report
        except ray.exceptions.RayError as exc:  # Ray's retries are spent: the cluster lost it
            raise WorkersLost(_lost_line(exc, spec)) from None
        except KeyboardInterrupt:  # stopping: a task that never returns is killed, not awaited
            for ref in pending:
                with contextlib.suppress(ray.exceptions.RayError, ConnectionError):
                    ray.cancel(ref, force=True)
            pending = []
            raise
        finally:
            for ref in pending:  # a cluster that is gone cannot cancel: nothing left to stop
                with contextlib.suppress(ray.exceptions.RayError, ConnectionError):
                    ray.cancel(ref, force=False)

    def placement(self) -> str | None:
        """"ray: 63 tasks on 2 nodes (10.0.0.5: 40, 10.0.0.6: 23)" for the tasks so far."""
        if not self._per_node:
            return None
        total = sum(self._per_node.values())
        nodes = ", ".join(f"{node}: {n}" for node, n in sorted(self._per_node.items()))
        return (f"ray: {total} task{'s' if total != 1 else ''} on {len(self._per_node)} "
                f"node{'s' if len(self._per_node) != 1 else ''} ({nodes})")

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()
        self._started = False
