"""Gibbs vs the paper's REP: solve time and bound on the paper's UAV matrix, and Gibbs at scale.

Prints one JSON object. Both solvers run in this process on the same input, so `speedup` is a
ratio measured in one run (median of repeats), not a figure from another machine.

    python benchmarks/posterior.py [--paper-dir ../shared/data/paper] [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from pacplan.pacbayes import posterior
from pacplan.pacbayes.rep import optimize_rep

REPO = Path(__file__).resolve().parents[1]


def median_seconds(fn, repeats: int) -> tuple[float, object]:
    result, times = None, []
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--paper-dir", type=Path, default=REPO.parent / "shared" / "data" / "paper")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--rep-repeats", type=int, default=3)
    ap.add_argument("--bound", default="quadratic")
    args = ap.parse_args()

    costs = np.load(args.paper_dir / "C_quadrotor.npy", allow_pickle=False).astype(np.float64)
    delta = 0.01
    posterior.optimize_gibbs(costs, delta, args.bound)  # warm caches and imports
    optimize_rep(costs[:50], delta, args.bound, grid_points=3, refine_steps=2)
    gibbs_s, gibbs = median_seconds(lambda: posterior.optimize_gibbs(costs, delta, args.bound),
                                    args.repeats)
    rep_s, rep = median_seconds(lambda: optimize_rep(costs, delta, args.bound),
                                args.rep_repeats)

    rng = np.random.default_rng(0)
    scale = {}
    for m in (10_000, 100_000):
        big = rng.random((100, m)) ** 3
        scale[m], _ = median_seconds(lambda big=big: posterior.optimize_gibbs(big, delta,
                                                                              args.bound), 3)
    print(json.dumps({
        "matrix": "C_quadrotor.npy", "n": int(costs.shape[0]), "m": int(costs.shape[1]),
        "bound": args.bound, "delta": delta,
        "gibbs_s": gibbs_s, "rep_s": rep_s, "speedup": rep_s / gibbs_s,
        "gibbs_bound": gibbs.value, "rep_bound": rep.value,
        "gibbs_minus_rep": gibbs.value - rep.value,
        "gibbs_s_m10000": scale[10_000], "gibbs_s_m100000": scale[100_000],
        "scale_rows": 100, "rep_solver": rep.solver,
    }, indent=2))


if __name__ == "__main__":
    main()
