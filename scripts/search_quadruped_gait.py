"""Search the open-loop sine gaits for the quadruped ES's starting mean; prints ONE JSON object.

    python scripts/search_quadruped_gait.py [--workers 2] [--write]

Why: ES with a small σ moves the gait parameters slowly, and the reference gait (a1 = a2 = 0.5,
ω = 30) stalls at the first ridge on the Derpy, so the prior starts from the best *constant* gait
instead. Every gait on a grid (a1, a2 ∈ {0.2, 0.4, …, 1.0}, ω ∈ {20, 25, …, 40} rad/s, no
steering) walks the same prior-training terrains (seeds from the prior range only, so the
certificate's independence is untouched); the best few are walked again on more terrains and the
winner, as weights that run it whatever the policy sees (`gait_theta`), is written with --write
to src/pacplan/presets/priors/quadruped-gait-best.safetensors.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT, GaitParams
from pacplan.worlds.quadruped.policy import gait_theta

OUT = (Path(__file__).resolve().parents[1] / "src" / "pacplan" / "presets" / "priors"
       / "quadruped-gait-best.safetensors")
OPTIONS = {"max_slope_deg": 23.3, "physics": "mujoco", "robot": "derpy"}
GRID_SEEDS = np.arange(1000, 1008)  # prior-training range
FINAL_SEEDS = np.arange(2000, 2040)


def _costs(args: tuple[list[tuple[float, float, float]], np.ndarray]) -> np.ndarray:
    gaits, seeds = args
    world = QuadrupedWorld(**OPTIONS)
    thetas = np.stack([gait_theta(GaitParams(a1=a1, a2=a2, a_st=0.0, omega=w))
                       for a1, a2, w in gaits])
    return world.costs(thetas, seeds)  # (n_seeds, n_gaits)


def _walk(gaits: list[tuple[float, float, float]], seeds: np.ndarray, workers: int) -> np.ndarray:
    parts = [gaits[i::workers] for i in range(workers)]
    with ProcessPoolExecutor(workers) as pool:
        results = list(pool.map(_costs, [(p, seeds) for p in parts]))
    out = np.empty(len(gaits))
    for i, res in enumerate(results):
        out[i::workers] = res.mean(axis=0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--top", type=int, default=6)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    t0 = time.time()
    levels = [0.2, 0.4, 0.6, 0.8, 1.0]
    grid = [(a1, a2, w) for a1, a2, w in itertools.product(levels, levels, [20.0, 25.0, 30.0,
                                                                          35.0, 40.0])]
    grid_cost = _walk(grid, GRID_SEEDS, args.workers)
    order = np.argsort(grid_cost, kind="stable")[: args.top]
    ref = (REFERENCE_GAIT.a1, REFERENCE_GAIT.a2, REFERENCE_GAIT.omega)
    finalists = [grid[i] for i in order] + [ref]
    final_cost = _walk(finalists, FINAL_SEEDS, args.workers)
    best = finalists[int(np.argmin(final_cost[:-1]))]
    if args.write:
        theta = gait_theta(GaitParams(a1=best[0], a2=best[1], a_st=0.0, omega=best[2]))
        save_file({"theta": theta.astype("float32")}, str(OUT))
    print(json.dumps({
        "grid_seeds": [int(GRID_SEEDS[0]), int(GRID_SEEDS[-1]) + 1],
        "final_seeds": [int(FINAL_SEEDS[0]), int(FINAL_SEEDS[-1]) + 1],
        "grid": [{"a1": g[0], "a2": g[1], "omega": g[2], "cost": round(float(c), 4)}
                 for g, c in zip(grid, grid_cost)],
        "finalists": [{"a1": g[0], "a2": g[1], "omega": g[2], "cost": round(float(c), 4)}
                      for g, c in zip(finalists, final_cost)],
        "best": {"a1": best[0], "a2": best[1], "omega": best[2]},
        "reference_gait_cost": round(float(final_cost[-1]), 4),
        "ratio_best_to_reference": round(float(final_cost[:-1].min() / final_cost[-1]), 4),
        "seconds": round(time.time() - t0, 1),
        "written": str(OUT) if args.write else None,
    }, indent=1))


if __name__ == "__main__":
    main()
