"""UAV cost-matrix throughput at scale: one process against K worker processes, one JSON line.

    python benchmarks/uav_scale_throughput.py [--seeds 2000] [--workers 2] [--quick]

What a large certification run (uav-tight: 7.5 million rollouts) spends its time on: the
shipped UAV prior's 50 policies on fresh seeds, through pacplan's own executors with the
uav-tight chunk sizes (200 seeds × 50 policies per chunk), compiled batched simulator. Each
executor is warmed up on one chunk first (torch.compile, worker start-up), so the timed part is
the steady rate; both are timed in this one process under the same machine load, and the ratio
is the figure to trust. Also reports whether the two cost matrices are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from pacplan.es.checkpoint import load_prior
from pacplan.portable import exp
from pacplan.presets import resolve_prior
from pacplan.run.executors import WorldSpec, make_executor


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=2000, help="environments timed per executor")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="400 seeds: a smoke run")
    args = ap.parse_args()
    n_seeds = 400 if args.quick else args.seeds
    mu, logvar = load_prior(resolve_prior("uav"))
    rng = np.random.default_rng(0)
    thetas = (mu + exp(0.5 * logvar) * rng.standard_normal((50, mu.size))).astype(np.float32)
    spec = WorldSpec("uav", {"simulator": "batched", "compile": True})
    warm = np.arange(9_000_000, 9_000_200, dtype=np.int64)
    seeds = np.arange(9_100_000, 9_100_000 + n_seeds, dtype=np.int64)
    out: dict[str, object] = {"benchmark": "uav_scale_throughput", "seeds": n_seeds,
                              "policies": 50, "rollouts": n_seeds * 50,
                              "cpus": os.cpu_count(), "load_avg_1min": os.getloadavg()[0]}
    matrices = {}
    for label, kind, workers in (("one_process", "serial", None),
                                 (f"{args.workers}_processes", "processes", args.workers)):
        with make_executor(kind, workers, chunk_policies=50, chunk_seeds=200) as ex:
            t0 = time.perf_counter()
            ex.cost_matrix(spec, thetas, warm)
            warm_s = time.perf_counter() - t0
            t0 = time.perf_counter()
            matrices[label] = ex.cost_matrix(spec, thetas, seeds)
            seconds = time.perf_counter() - t0
        out[label] = {"rollouts_per_s": round(n_seeds * 50 / seconds, 1),
                      "seconds": round(seconds, 2), "warmup_s": round(warm_s, 2)}
    one, many = (out[k]["rollouts_per_s"] for k in matrices)  # type: ignore[index]
    out["speedup"] = round(many / one, 3)
    out["goal_10000_per_s_met"] = bool(many >= 10_000)
    out["identical_costs"] = bool(np.array_equal(*matrices.values()))
    out["mean_cost"] = round(float(np.mean(matrices["one_process"])), 5)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
