"""UAV rollout throughput: batched (PyTorch) vs PyBullet on the same (θ, seeds), one JSON line.

    python benchmarks/uav_rollouts.py [--quick] [--device cpu|cuda|auto] [--eager]

Both simulators roll the same k = 50 policies (θ ~ N(0, 0.1²), the paper's m = 50) on the same
seeds in this one process, so the ratio is measured under the same machine load. The batched
simulator is warmed up first (torch.compile happens there, reported as compile_s) and timed as
the best of a few repeats; PyBullet is timed once. `batched_rollouts_per_s_at_scale` also times
a larger batched-only workload (a cost-matrix chunk), which is what certification runs.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from pacplan.worlds.uav import UAVWorld, spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="finish in under a minute")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--eager", action="store_true", help="batched without torch.compile")
    ap.add_argument("--policies", type=int, default=50)
    args = ap.parse_args()
    n_seeds, n_scale, repeats = (6, 256, 3) if args.quick else (16, 1024, 5)
    k = args.policies
    thetas = np.random.default_rng(0).normal(0, 0.1, (k, spec.POLICY_DIM)).astype(np.float32)
    seeds = np.arange(100_000, 100_000 + n_seeds)

    batched = UAVWorld(simulator="batched", device=args.device, compile=not args.eager)
    t0 = time.perf_counter()
    batched.costs(thetas[:2], seeds[:2])  # builds, compiles (or loads the compile cache)
    compile_s = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        cb = batched.costs(thetas, seeds)
        best = min(best, time.perf_counter() - t0)
    scale_seeds = np.arange(200_000, 200_000 + n_scale)
    t0 = time.perf_counter()
    batched.costs(thetas, scale_seeds)
    scale_s = time.perf_counter() - t0

    bullet = UAVWorld(simulator="bullet")
    t0 = time.perf_counter()
    cp = bullet.costs(thetas, seeds)
    bullet_s = time.perf_counter() - t0

    b_rate = cb.size / best
    p_rate = cp.size / bullet_s
    scale_rate = n_scale * k / scale_s
    print(
        json.dumps(
            {
                "batched_rollouts_per_s": round(b_rate, 1),
                "bullet_rollouts_per_s": round(p_rate, 2),
                "ratio": round(b_rate / p_rate, 1),
                "rollouts": int(cb.size),
                "share_identical_cost": float((cb == cp).mean()),
                "batched_rollouts_per_s_at_scale": round(scale_rate, 1),
                "rollouts_at_scale": n_scale * k,
                "paper_matrix_4000x50_minutes_est": round(4000 * 50 / scale_rate / 60, 2),
                "compile_s": round(compile_s, 1),
                "device": str(batched.sim.device),
                "compile": not args.eager,
                "torch_threads": batched.threads,
                "cpu_count": os.cpu_count(),
                "load_avg_1min": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
