"""Why net_scale = 5 m: mean/best/worst cost of random policies for a few scales, one JSON line.

    python benchmarks/uav_net_scale.py [--seeds 300]

For θ ~ N(0, σ²) (σ = 0.1, 0.3) and net_scale in {1, 5, 10, 20}: the mean cost over 10 random
policies, the best and worst policy, and how often a policy's first primitive equals the first
policy's (how much θ changes decisions). The Depth Filter alone is the reference.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from pacplan.worlds.uav import UAVWorld, spec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=300)
    args = ap.parse_args()
    seeds = np.arange(1000, 1000 + args.seeds)
    zero = np.zeros((1, spec.POLICY_DIM), np.float32)
    out = {"depth_filter_only": float(UAVWorld(use_net=False).costs(zero, seeds).mean())}
    rows = []
    for sigma in (0.1, 0.3):
        th = np.random.default_rng(0).normal(0, sigma, (10, spec.POLICY_DIM)).astype(np.float32)
        for scale in (1.0, 5.0, 10.0, 20.0):
            r = UAVWorld(net_scale=scale).rollouts(th, seeds)
            c = r.costs.mean(0)
            rows.append(
                {
                    "sigma": sigma,
                    "net_scale": scale,
                    "mean": round(float(c.mean()), 4),
                    "best": round(float(c.min()), 4),
                    "worst": round(float(c.max()), 4),
                    "first_primitive_agreement": round(
                        float((r.prims[:, :, 0] == r.prims[:, :1, 0]).mean()), 3
                    ),
                }
            )
    out["random_policies"] = rows
    print(json.dumps(out))


if __name__ == "__main__":
    main()
