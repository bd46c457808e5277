"""How good is a UAV prior? Its mean policy and its samples on held-out environments, one JSON line.

    python benchmarks/uav_prior_eval.py [--priors PRIOR ...] [--envs 2000] [--samples 20]

For each prior (a shipped name or a .safetensors file): the cost of the mean policy μ, the mean
cost of `--samples` policies drawn from N(μ, σ²) (what the certificate's m policies look like),
and the best of those samples, all on the same `--envs` environments from seed 400,000 on —
disjoint from every preset's prior-training, held-out, certification and test seeds. Priors are
compared in one run on the same environments and the same world (batched, compiled, as the
presets fly it), so differences are the priors'.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from pacplan.es.checkpoint import load_prior, load_prior_seeds
from pacplan.presets import resolve_prior
from pacplan.worlds.uav import UAVWorld

HELD_OUT_START = 400_000
EARLIER = Path(__file__).parent / "data" / "uav-v1" / "uav-v1.safetensors"
"""The UAV prior shipped before the large-batch ES (400 iterations), kept for comparisons."""


def evaluate(world: UAVWorld, prior: str, seeds: np.ndarray, samples: int) -> dict[str, object]:
    path = resolve_prior(prior)
    mu, logvar = load_prior(path)
    draws = np.random.default_rng(0).standard_normal((samples, mu.size))
    thetas = np.vstack([mu, mu + np.exp(0.5 * logvar) * draws]).astype(np.float32)
    t0 = time.perf_counter()
    costs = world.costs(thetas, seeds).mean(axis=0)  # per policy, over environments
    return {
        "prior": Path(prior).stem if Path(prior).is_file() else prior,
        "trained_on_seeds": load_prior_seeds(path),
        "mean_policy_cost": round(float(costs[0]), 4),
        "samples_mean_cost": round(float(costs[1:].mean()), 4),
        "samples_best_cost": round(float(costs[1:].min()), 4),
        "samples_worst_cost": round(float(costs[1:].max()), 4),
        "sigma_mean": round(float(np.exp(0.5 * logvar).mean()), 4),
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--priors", nargs="+", default=[str(EARLIER), "uav-es"],
                    help="shipped prior names or files (default: the earlier and the shipped)")
    ap.add_argument("--envs", type=int, default=2000)
    ap.add_argument("--samples", type=int, default=20)
    args = ap.parse_args()
    seeds = np.arange(HELD_OUT_START, HELD_OUT_START + args.envs, dtype=np.int64)
    world = UAVWorld(simulator="batched", compile=True)
    rows = [evaluate(world, p, seeds, args.samples) for p in args.priors]
    print(json.dumps({"envs": args.envs, "seeds": [HELD_OUT_START, HELD_OUT_START + args.envs],
                      "samples": args.samples, "priors": rows}))


if __name__ == "__main__":
    main()
