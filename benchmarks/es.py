"""ES rollout throughput per executor on a CPU-bound toy world; prints ONE JSON object.

    python benchmarks/es.py [--quick] [--no-ray]

Each measurement is one ES-style `paired_costs` call (envs × 2·pairs rollouts, every environment
with its own perturbed weights). Executors are started and warmed up first (pool start-up and
world construction are not timed), then timed in interleaved rounds so a load change on a shared
machine hits all of them alike; the median round is reported. `speedup_2_workers` is the
processes executor with 2 workers over the same executor with 1 worker, both measured here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.pipeline.execution.executors import Executor, WorldSpec, make_executor


def _worker_cpu_s(ex: Executor) -> float | None:
    """CPU seconds used so far by a process executor's workers (Linux /proc), else None."""
    pool = getattr(ex, "_pool", None)
    if pool is None or not sys.platform.startswith("linux"):
        return None
    total = 0.0
    for pid in list(getattr(pool, "_processes", {}) or {}):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return None
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _burn(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


def _ceiling_speedup(rounds: int, n: int = 3_000_000) -> float:
    """What this machine gives 2 processes over 1 right now, on pure-Python work, no pacplan.

    The upper bound for `speedup_2_workers` at the moment of measurement (a shared machine whose
    other core is busy reads about 1).
    """
    import multiprocessing as mp

    one, two = [], []
    with mp.get_context("spawn").Pool(2) as pool:
        pool.map(_burn, [10, 10])
        for _ in range(rounds):
            t0 = time.perf_counter()
            pool.map(_burn, [n], chunksize=1)
            pool.map(_burn, [n], chunksize=1)
            one.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            pool.map(_burn, [n, n], chunksize=1)
            two.append(time.perf_counter() - t0)
    return statistics.median(one) / statistics.median(two)


def _time_call(ex: Executor, spec: WorldSpec, thetas: np.ndarray, seeds: np.ndarray,
               expect: np.ndarray | None) -> float:
    t0 = time.perf_counter()
    out = ex.paired_costs(spec, thetas, seeds)
    dt = time.perf_counter() - t0
    if expect is not None and not np.array_equal(out, expect):
        raise SystemExit(f"executor {ex.kind} disagrees with serial")
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (about 20 s)")
    ap.add_argument("--no-ray", action="store_true", help="skip the Ray executor")
    ap.add_argument("--work", type=int, default=300, help="toy busy-work per rollout")
    args = ap.parse_args()

    rounds = 3 if args.quick else 8
    envs, pairs, dim = 32, 8, 16
    spec = WorldSpec("toy", {"dim": dim, "work": args.work})
    chunks = {"chunk_policies": 2 * pairs, "chunk_seeds": 2}
    rng = np.random.default_rng(0)
    thetas = rng.standard_normal((envs, 2 * pairs, dim)).astype(np.float32)
    seeds = np.arange(envs, dtype=np.int64)

    executors: dict[str, Executor] = {
        "serial": make_executor("serial", **chunks),
        "processes_1": make_executor("processes", workers=1, **chunks),
        "processes_2": make_executor("processes", workers=2, **chunks),
    }
    result: dict[str, Any] = {}
    if not args.no_ray:
        try:
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            import ray

            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                     logging_level="ERROR")
            executors["ray_2"] = make_executor("ray", **chunks)
        except Exception as exc:  # Ray missing or not startable: report, keep the rest
            result["ray_error"] = f"{type(exc).__name__}: {exc}"
    try:
        expect = executors["serial"].paired_costs(spec, thetas, seeds)
        for ex in executors.values():  # warm-up: start workers, build the world in each
            _time_call(ex, spec, thetas, seeds, expect)
            _time_call(ex, spec, thetas, seeds, expect)
        times: dict[str, list[float]] = {k: [] for k in executors}
        cpu: dict[str, float] = {}
        for _ in range(rounds):
            for name, ex in executors.items():
                c0 = _worker_cpu_s(ex)
                times[name].append(_time_call(ex, spec, thetas, seeds, expect))
                c1 = _worker_cpu_s(ex)
                if c0 is not None and c1 is not None:
                    cpu[name] = cpu.get(name, 0.0) + (c1 - c0)
    finally:
        for ex in executors.values():
            ex.close()
        if "ray_2" in executors:
            import ray

            ray.shutdown()

    ceiling = _ceiling_speedup(rounds)
    rollouts = envs * 2 * pairs
    rps = {k: rollouts / statistics.median(v) for k, v in times.items()}
    result.update({
        "benchmark": "es_paired_costs",
        "world": {"name": spec.name, **spec.options},
        "rollouts_per_call": rollouts,
        "tasks_per_call": len(range(0, envs, chunks["chunk_seeds"])),
        "rounds": rounds,
        "rollouts_per_s": {k: round(v, 1) for k, v in rps.items()},
        "speedup_2_workers": round(rps["processes_2"] / rps["processes_1"], 3),
        "speedup_2_workers_vs_serial": round(rps["processes_2"] / rps["serial"], 3),
        "machine_ceiling_speedup_2_processes": round(ceiling, 3),
        "bit_identical": True,
        "cpu_count": os.cpu_count(),
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "python": sys.version.split()[0],
    })
    if cpu:
        # Cores the workers actually got while timed: < workers means a busy (shared) machine.
        result["worker_cores_used"] = {k: round(v / sum(times[k]), 2) for k, v in cpu.items()}
        # Throughput per CPU-second the workers actually received: equal values for 1 and 2
        # workers mean no parallel overhead, whatever share of the machine was free.
        result["rollouts_per_worker_cpu_s"] = {
            k: round(rollouts * len(times[k]) / v, 1) for k, v in cpu.items() if v > 0
        }
    if "ray_2" in rps:
        result["speedup_ray_2_vs_processes_1"] = round(rps["ray_2"] / rps["processes_1"], 3)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
