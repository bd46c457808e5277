"""Go/no-go of issue 65: how often a prior's draws stall before a steep first tent; ONE JSON object.

    nice -n 10 python benchmarks/quadruped_steep_stall.py
        --prior runs/quadruped-paper-code-bullet-prior/prior.safetensors
        [--prior src/pacplan/presets/priors/quadruped-paper-code-twin.safetensors]
        [--terrains 30] [--first-seed 300000] [--draws 1] [--physics bullet] [--workers 1]

Why: pacplan's twin-trained paper-code prior walks in place in front of a first tent of 20° or
more until time runs out (about 80 % of its draws there; the paper's prior about 15 %), and
the PyBullet fine-tuning (priors/quadruped-paper-code-bullet-prior.yaml) is judged by that share
after about 20 iterations. Terrains: the first `--terrains` seeds from `--first-seed` on in the
world's `steep` stratum (by default in seeds.prior_eval [300000, 300500), held out from ES's
draws and from every certificate and test range: overlap with those is refused). Each prior
(the file's σ, as certificates draw) flies `--draws` draws per terrain, draw k on terrain s =
μ + σ ⊙ z with z from `default_rng([k, s])`, the same z for every prior (paired). A rollout
`stalls` when time ran out (no fall, no finish) with the torso still within 0.9 m of the start
(cost ≥ 0.85): it never got over the first tent. Prints, per prior: stall, fall, finish and
timeout shares, mean cost with a 95 % interval, CPU-s per rollout.

Measured (PyBullet, the default 30 terrains, one draw each, 32 s on one core): the shipped
twin-trained `quadruped-paper-code` prior stalls on 0.70 (timeouts 0.83, falls 0.17, no
finish), mean cost 0.872 [0.771, 0.972], 1.06 CPU-s per rollout. After all 60 iterations of
the PyBullet fine-tuning (`--draws 3 --workers 2`, 90 paired rollouts a prior, 96 s): stall
0.52 against the shipped prior's 0.66, falls 0.30 against 0.21, 2 finishes, mean cost 0.840
[0.782, 0.899] against 0.872 [0.813, 0.931] (benchmarks/data/quadruped-steep-stall-it60.json):
not the paper's ~15 % stall share, so the shipped prior stays.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.es.checkpoint import load_prior
from pacplan.presets import seed_ranges
from pacplan.worlds.base import stratum_members
from pacplan.worlds.quadruped import QuadrupedWorld

STALL_COST = 0.85  # the torso ended within 0.9 m of its start: before or on the first tent
FIRST_SEED = 300_000  # seeds.prior_eval of the paper-code recipes: held out from ES's draws


def steep_seeds(world: QuadrupedWorld, first: int, count: int, span: int = 10_000) -> list[int]:
    """The first `count` seeds from `first` on in the world's `steep` stratum."""
    seeds = np.arange(first, first + span, dtype=np.int64)
    found = seeds[stratum_members(world, "steep", seeds)][:count]
    if found.size < count:
        raise SystemExit(f"error: only {found.size} steep seeds in [{first}, {first + span})")
    return [int(s) for s in found]


def check_held_out(seeds: list[int]) -> None:
    """Refuse terrains that any shipped quadruped config trains, certifies or tests on."""
    lo, hi = min(seeds), max(seeds) + 1
    for what, (a, b) in seed_ranges("quadruped").items():
        if not what.endswith("prior_eval") and a < hi and lo < b:
            raise SystemExit(f"error: terrains [{lo}, {hi}) overlap {what} seeds [{a}, {b})")


def draw(mu: np.ndarray, sigma: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Draw k on terrain `seed`: the same standard normals for every prior (paired)."""
    z = np.random.default_rng([k, seed]).standard_normal(mu.size)
    return (mu + sigma * z).astype(np.float32)


def is_stall(row: dict[str, Any]) -> bool:
    """Time ran out with the torso still before the first tent's far side."""
    return not row["fell"] and not row["finished"] and row["cost"] >= STALL_COST


def _walk(task: tuple[dict[str, Any], str, int, list[int]]) -> list[dict[str, Any]]:
    options, prior, k, seeds = task
    mu, logvar = load_prior(prior)
    sigma = np.exp(0.5 * logvar)
    world = QuadrupedWorld(**options)
    rows = []
    for seed in seeds:
        c0 = time.process_time()
        r = world.rollout(draw(mu, sigma, k, seed), seed)
        rows.append({"prior": prior, "draw": k, "seed": seed, "cost": r.cost, "fell": r.fell,
                     "finished": r.finished, "cpu_s": time.process_time() - c0})
    world.close()
    return rows


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One prior's shares and mean cost."""
    n = len(rows)
    cost = np.array([r["cost"] for r in rows])
    half = 1.96 * float(cost.std(ddof=1)) / math.sqrt(n) if n > 1 else float("nan")
    return {"rollouts": n,
            "stall_share": round(sum(map(is_stall, rows)) / n, 4),
            "fall_share": round(sum(r["fell"] for r in rows) / n, 4),
            "finish_share": round(sum(r["finished"] for r in rows) / n, 4),
            "timeout_share": round(sum(not r["fell"] and not r["finished"] for r in rows) / n, 4),
            "mean_cost": round(float(cost.mean()), 4),
            "cost_95ci": [round(float(cost.mean()) - half, 4), round(float(cost.mean()) + half, 4)],
            "cpu_s_per_rollout": round(float(np.mean([r["cpu_s"] for r in rows])), 3)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prior", type=Path, action="append", required=True)
    ap.add_argument("--terrains", type=int, default=30)
    ap.add_argument("--first-seed", type=int, default=FIRST_SEED)
    ap.add_argument("--draws", type=int, default=1)
    ap.add_argument("--physics", choices=("bullet", "mujoco"), default="bullet")
    ap.add_argument("--workers", type=int, default=1)
    args = ap.parse_args(argv)
    options = {"variant": "paper-code", "physics": args.physics}
    seeds = steep_seeds(QuadrupedWorld(**options), args.first_seed, args.terrains)
    check_held_out(seeds)
    tasks = [(options, str(p), k, seeds) for p in args.prior for k in range(args.draws)]
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        rows = [row for part in pool.map(_walk, tasks) for row in part]
    out = {"benchmark": "quadruped_steep_stall", "world": options, "seeds": seeds,
           "draws_per_terrain": args.draws, "stall": f"no fall, no finish, cost >= {STALL_COST}",
           "priors": {str(p): summarise([r for r in rows if r["prior"] == str(p)])
                      for p in args.prior},
           "wall_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
