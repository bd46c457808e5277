"""Executors: serial, processes and Ray agree to the bit; chunks resume; crashes are clean."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.execution.executors import (
    SerialExecutor,
    WorkersLost,
    WorldSpec,
    chunk_grid,
    compute_task,
    make_executor,
)
from pacplan.pipeline.prior.training import train_prior
from pacplan.worlds.toy import ToyWorld

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

SPEC = WorldSpec("toy", {"dim": 6, "shift": 0.5})
CHUNKS = {"chunk_policies": 7, "chunk_seeds": 5}


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    thetas = rng.standard_normal((31, 6)).astype(np.float32)
    seeds = np.arange(500, 523, dtype=np.int64)
    paired = rng.standard_normal((23, 10, 6)).astype(np.float32)
    return thetas, seeds, paired


@pytest.fixture(scope="module")
def pool() -> Iterator:
    with make_executor("processes", workers=2, **CHUNKS) as ex:
        yield ex


def _oracle(thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """The world called directly, no executor involved."""
    return ToyWorld(**SPEC.options).costs(thetas, seeds)


def _paired_oracle(paired: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    w = ToyWorld(**SPEC.options)
    return np.stack([w.costs(paired[i], seeds[i : i + 1])[0] for i in range(len(seeds))])


class _Sleeps:
    """Costs after 0.3 s of wall time and almost no CPU time."""

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        time.sleep(0.3)
        return np.full((len(seeds), len(thetas)), 0.5)


class _Burns:
    """Costs after 0.3 s of this process's CPU time."""

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        start = time.process_time()
        while time.process_time() - start < 0.3:
            pass
        return np.full((len(seeds), len(thetas)), 0.5)


def test_a_task_says_the_cpu_time_it_took_not_its_wall_time() -> None:
    blocks = [(np.arange(2, dtype=np.int64), np.zeros((3, 6), dtype=np.float32))]
    slept = compute_task(_Sleeps(), SPEC, blocks)
    burnt = compute_task(_Burns(), SPEC, blocks)
    assert slept.blocks[0].shape == (2, 3) and burnt.blocks[0].shape == (2, 3)
    assert slept.cpu_s < 0.15 and burnt.cpu_s >= 0.3


def test_chunk_grid_tiles_the_matrix_exactly_once() -> None:
    cover = np.zeros((23, 31), dtype=int)
    for s, t in chunk_grid(23, 31, 5, 7):
        cover[s, t] += 1
    assert np.all(cover == 1)
    assert len(chunk_grid(23, 31, 5, 7)) == 5 * 5


def test_serial_matches_the_world(data: tuple) -> None:
    thetas, seeds, paired = data
    ex = SerialExecutor(**CHUNKS)
    assert np.array_equal(ex.cost_matrix(SPEC, thetas, seeds), _oracle(thetas, seeds))
    assert np.array_equal(ex.paired_costs(SPEC, paired, seeds), _paired_oracle(paired, seeds))


def test_processes_agree_with_serial_to_the_bit(pool, data: tuple) -> None:
    thetas, seeds, paired = data
    serial = SerialExecutor(**CHUNKS)
    assert np.array_equal(pool.cost_matrix(SPEC, thetas, seeds),
                          serial.cost_matrix(SPEC, thetas, seeds))
    assert np.array_equal(pool.paired_costs(SPEC, paired, seeds),
                          serial.paired_costs(SPEC, paired, seeds))


def test_iter_chunks_skips_finished_chunks_and_resumes(pool, data: tuple) -> None:
    """Simulates the pipeline: persist a few chunks, 'die', resume with skip=done."""
    thetas, seeds, _ = data
    full = _oracle(thetas, seeds)
    out = np.full(full.shape, np.nan)
    done: set[tuple[int, int]] = set()
    for i, ch in enumerate(pool.iter_chunks(SPEC, thetas, seeds)):
        assert np.array_equal(ch.block, full[ch.seeds, ch.thetas])
        out[ch.seeds, ch.thetas] = ch.block
        done.add(ch.key)
        if i == 6:
            break  # killed after 7 chunks
    rest = list(pool.iter_chunks(SPEC, thetas, seeds, skip=done))
    assert len(rest) == 25 - 7
    assert not {c.key for c in rest} & done
    assert all(c.cpu_s >= 0 for c in rest) and sum(c.cpu_s for c in rest) > 0  # in the workers
    for ch in rest:
        out[ch.seeds, ch.thetas] = ch.block
    assert np.array_equal(out, full)


def test_a_crashed_worker_is_a_clear_error_and_the_pool_recovers(pool, data: tuple) -> None:
    thetas, seeds, _ = data
    bad = WorldSpec("toy", {**SPEC.options, "crash_on_seed": 512})
    got = []
    with pytest.raises(WorkersLost, match=r"worker process died.*only whole chunks"):
        for ch in pool.iter_chunks(bad, thetas, seeds):
            got.append(ch)
    # Nothing yielded covers the crashing seed: no partial block ever leaves the executor.
    assert all(not (ch.seeds.start <= 512 - 500 < ch.seeds.stop) for ch in got)
    with pytest.raises(PacplanError, match="worker process died"):
        pool.cost_matrix(bad, thetas, seeds)
    # The next call gets a fresh pool and the right answer.
    assert np.array_equal(pool.cost_matrix(SPEC, thetas, seeds), _oracle(thetas, seeds))


def test_world_errors_in_workers_stay_user_errors(pool, data: tuple) -> None:
    thetas, seeds, _ = data
    with pytest.raises(PacplanError, match="thetas must be"):
        pool.cost_matrix(SPEC, thetas[:, :4], seeds)


def test_costs_outside_unit_interval_are_rejected() -> None:
    class Bad:
        name = "bad"

        def policy_dim(self) -> int:
            return 1

        def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
            c = np.zeros((len(seeds), len(thetas)))
            c[-1, -1] = np.nan
            return c

    spec = WorldSpec("bad-test-world", {})
    with pytest.raises(PacplanError, match=r"bad-test-world.*NaN"):
        compute_task(Bad(), spec, [(np.arange(3), np.zeros((2, 1), np.float32))])


def test_bad_inputs() -> None:
    ex = SerialExecutor()
    with pytest.raises(PacplanError, match="NaN"):
        ex.cost_matrix(SPEC, np.full((2, 6), np.nan), np.arange(2))
    with pytest.raises(PacplanError, match="paired thetas"):
        ex.paired_costs(SPEC, np.zeros((3, 6), np.float32), np.arange(3))
    with pytest.raises(PacplanError, match="unknown executor"):
        make_executor("gpu")
    with pytest.raises(PacplanError, match="unknown world"):
        ex.cost_matrix(WorldSpec("nope", {}), np.zeros((1, 6)), np.arange(1))


def _es_config(iterations: int):
    """A small toy ES run with this module's chunking."""
    return parse_config({
        "name": "t", "world": {"name": "toy", "options": SPEC.options},
        "seeds": {"prior": [0, 300], "cert": [1000, 1100], "test": [2000, 2100]},
        "es": {"iterations": iterations, "envs_per_iter": 8, "pairs_per_env": 3, "seed": 1},
        "executor": CHUNKS,
    })


def test_es_result_does_not_depend_on_the_executor(pool, tmp_path: Path) -> None:
    cfg = _es_config(iterations=6)
    a = train_prior(cfg, tmp_path / "serial", progress=False)
    b = train_prior(cfg, tmp_path / "proc", executor=pool, progress=False)
    assert np.array_equal(a.mu, b.mu) and np.array_equal(a.logvar, b.logvar)


# -- Ray: one local instance for the whole module ----------------------------------------------
@pytest.fixture(scope="module")
def ray_executor() -> Iterator:
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield make_executor("ray", **CHUNKS)
    finally:
        ray.shutdown()


def test_ray_agrees_with_serial_to_the_bit(ray_executor, data: tuple, tmp_path: Path) -> None:
    thetas, seeds, paired = data
    serial = SerialExecutor(**CHUNKS)
    assert ray_executor.workers == 2
    assert np.array_equal(ray_executor.cost_matrix(SPEC, thetas, seeds),
                          serial.cost_matrix(SPEC, thetas, seeds))
    assert np.array_equal(ray_executor.paired_costs(SPEC, paired, seeds),
                          serial.paired_costs(SPEC, paired, seeds))
    keys = {c.key for c in ray_executor.iter_chunks(SPEC, thetas, seeds, skip={(0, 0), (5, 7)})}
    assert len(keys) == 23 and (0, 0) not in keys and (5, 7) not in keys
    with pytest.raises(PacplanError, match="thetas must be"):
        ray_executor.cost_matrix(SPEC, thetas[:, :4], seeds)
    cfg = _es_config(iterations=4)
    a = train_prior(cfg, tmp_path / "serial", progress=False)
    b = train_prior(cfg, tmp_path / "ray", executor=ray_executor, progress=False)
    assert np.array_equal(a.mu, b.mu) and np.array_equal(a.logvar, b.logvar)


def test_ray_counts_its_tasks_per_node(ray_executor, data: tuple) -> None:
    """Each finished task is counted on the node it ran on: one local node here, and as many
    tasks as the chunk grid has cells (ceil(n / chunk_seeds) × ceil(k / chunk_policies))."""
    import math
    import re

    import ray.util

    thetas, seeds, _ = data

    def counted() -> dict[str, int]:
        line = ray_executor.placement() or ""
        return {node: int(n) for node, n in re.findall(r"([\d.:a-f]+): (\d+)", line)}

    before = counted()
    ray_executor.cost_matrix(SPEC, thetas, seeds)
    after = counted()
    cells = math.ceil(len(seeds) / CHUNKS["chunk_seeds"]) * \
        math.ceil(len(thetas) / CHUNKS["chunk_policies"])
    node = ray.util.get_node_ip_address()
    assert set(after) == {node} and after[node] - before.get(node, 0) == cells
    assert SerialExecutor(**CHUNKS).placement() is None


@pytest.mark.slow
def test_cli_on_ray_prints_no_ray_info_lines_and_the_tasks_per_node(tmp_path: Path) -> None:
    """`pacplan run toy --executor ray`: Ray's own INFO lines ('Started a local Ray instance')
    stay out of the output; one line tells how the tasks spread over the nodes."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "MPLBACKEND": "Agg"}
    proc = subprocess.run([str(Path(sys.executable).parent / "pacplan"), "run", "toy",
                           "--executor", "ray", "--workers", "2", "--quiet", "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, env=env,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert " INFO " not in out and "Started a local Ray instance" not in out, out
    import re

    (line,) = [x for x in out.splitlines() if x.startswith("ray: ")]
    total, nodes = re.match(r"ray: (\d+) tasks on (\d+) nodes? \((.*)\)", line).group(1, 2)
    per_node = [int(n) for n in re.findall(r": (\d+)", line.split("(", 1)[1])]
    assert int(nodes) == len(per_node) == 1 and sum(per_node) == int(total) > 0


@pytest.mark.slow
def test_cli_toy_preset_processes_equals_serial(tmp_path: Path) -> None:
    """The full toy preset through the CLI on 2 worker processes gives the serial prior's bytes."""
    import subprocess
    import sys

    from pacplan.presets import preset_path

    cfg = preset_path("toy")
    for kind in ("serial", "processes"):
        subprocess.run(
            [sys.executable, "-m", "pacplan.cli", "train-prior", str(cfg), "--out",
             str(tmp_path / kind), "--executor", kind, "--workers", "2", "--quiet"],
            check=True, timeout=600, capture_output=True,
        )
    a = (tmp_path / "serial" / "es_state.safetensors").read_bytes()
    b = (tmp_path / "processes" / "es_state.safetensors").read_bytes()
    assert a == b


_DRIVER = """
import sys, time
import numpy as np
from pacplan.pipeline.execution.executors import WorldSpec
from pacplan.pipeline.execution.parallel import ProcessExecutor
ex = ProcessExecutor(workers=2)
ex.cost_matrix(WorldSpec("toy", {"dim": 3}), np.zeros((2, 3), np.float32), np.arange(8))
print(" ".join(str(p) for p in ex._pool._processes), flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_killing_the_driver_leaves_no_worker_processes() -> None:
    """A run killed with SIGKILL (no cleanup at all) takes its pool workers with it."""
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER], stdout=subprocess.PIPE, text=True)
    try:
        workers = [int(p) for p in proc.stdout.readline().split()]
        assert workers and all(_alive(p) for p in workers)
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(p) for p in workers)


def _sigterm_disposition(_: int) -> bool:
    import signal

    return signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_a_spawned_pool_leaves_signals_to_the_driver_and_cancels_unstarted_jobs() -> None:
    """The distillers' pool: its workers ignore SIGTERM (the driver decides: a signal to the
    whole process group must not kill them mid-task), even one sent while they are still
    starting, and leaving the block early cancels the jobs not yet started instead of running
    the whole list first."""
    import multiprocessing
    import signal

    from pacplan.pipeline.execution.parallel import spawned_pool

    with spawned_pool(2) as pool:
        children = multiprocessing.active_children()
        assert len(children) >= 2
        for child in children:  # most likely still importing, before any initializer
            os.kill(child.pid, signal.SIGTERM)
        assert all(pool.map(_sigterm_disposition, range(4)))
    futures = []
    with pytest.raises(KeyboardInterrupt), spawned_pool(2) as pool:
        futures = [pool.submit(time.sleep, 0.2) for _ in range(200)]
        raise KeyboardInterrupt
    assert sum(f.cancelled() for f in futures) > 100


def test_ctrl_c_still_gives_the_tasks_that_were_running(data: tuple) -> None:
    """Ctrl-C during a parallel cost matrix: the tasks not started are cancelled, and those
    already running (the pool's shutdown waits for them in any case) still come out, each
    right, before the interrupt goes on, so a stopped `pacplan run` keeps them as chunks."""
    import signal
    import threading

    spec = WorldSpec("toy", {**SPEC.options, "work": 200_000})  # about a second a task
    thetas, seeds = data[0][:1], data[1][:12]
    got: list = []
    fired: list[int] = []

    def ctrl_c(signum: int, frame: object) -> None:
        fired.append(len(got))
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, ctrl_c)
    try:
        with make_executor("processes", workers=2, chunk_policies=1, chunk_seeds=1) as ex, \
                pytest.raises(KeyboardInterrupt):
            for chunk in ex.iter_chunks(spec, thetas, seeds):
                got.append(chunk)
                if len(got) == 1:  # the driver is waiting for the next task when it comes
                    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    finally:
        signal.signal(signal.SIGINT, previous)
    assert fired and fired[0] < len(got) < len(seeds)
    for chunk in got:
        assert chunk.block.tobytes() == _oracle(thetas, seeds[chunk.seeds]).tobytes()
