"""Cross-validate the batched UAV simulator against PyBullet; prints one JSON object.

    python benchmarks/uav_crossval.py [--seeds 50] [--policies 20] [--first-seed 0] [--eager]
                                      [--prior uav]

With --prior the policies are the prior's mean and policies − 1 draws from it (a trained
planner, which flies much further than random weights), instead of random weights.

Figures: (a) depth-image error at the same poses (median, 99th percentile), (b) share of
replayed primitive sequences whose collision times agree, (c) closed-loop mean costs of both
simulators, their difference in percentage points and the share of identical costs; plus every
disagreement with the data that explains it (see pacplan.worlds.uav.crossval).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from pacplan.es.checkpoint import load_prior
from pacplan.presets import resolve_prior
from pacplan.worlds.uav import crossval


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--policies", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--eager", action="store_true", help="batched without torch.compile")
    ap.add_argument("--prior", help="a shipped prior name or .safetensors file")
    args = ap.parse_args()
    t0 = time.perf_counter()
    seeds = np.arange(args.first_seed, args.first_seed + args.seeds)
    thetas = crossval.test_policies(args.policies)
    if args.prior:
        mu, logvar = load_prior(resolve_prior(args.prior))
        eps = np.random.default_rng(0).standard_normal((args.policies - 1, mu.size))
        thetas = np.vstack([mu, mu + np.exp(0.5 * logvar) * eps]).astype(np.float32)
    out = crossval.run(seeds, thetas, compile=not args.eager)
    out["policies"] = f"prior {args.prior}" if args.prior else "random"
    out["compile"] = not args.eager
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
