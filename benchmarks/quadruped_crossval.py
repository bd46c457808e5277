"""Learned quadruped policies in MuJoCo against Bullet, policy by policy; prints ONE JSON object.

    nice python benchmarks/quadruped_crossval.py [--policies 10] [--terrains 50]
        [--first-seed 9100000] [--prior quadruped]

Why: the MuJoCo twin is calibrated with the open-loop reference gait; a certificate is about
learned policies, which see depth and react. Here the prior's mean and policies − 1 draws from it
(a fixed seed) walk the same terrains (seeds from 9,100,000: used by no preset, test or
calibration) in both engines on the same robot (the Derpy); the two cost matrices are computed
in two processes at once. Goals: each policy's mean cost within ±0.05, the overall mean within
±0.03. Also: the share of (policy, terrain) pairs whose costs differ by less than 0.05, the
correlation of per-policy means, and CPU seconds per engine.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import numpy as np

from pacplan.es.checkpoint import load_prior
from pacplan.presets import resolve_prior
from pacplan.worlds.quadruped import QuadrupedWorld

FIRST_SEED = 9_100_000


def _costs(args: tuple[str, np.ndarray, np.ndarray]) -> tuple[np.ndarray, float]:
    """(terrains, policies) costs in one engine, and the CPU seconds they took."""
    engine, thetas, seeds = args
    world = QuadrupedWorld(physics=engine)
    c0 = time.process_time()
    out = world.costs(thetas, seeds)
    return out, time.process_time() - c0


def policies(prior: str, n: int, seed: int = 0) -> np.ndarray:
    """The prior's mean and n − 1 draws from it."""
    mu, logvar = load_prior(resolve_prior(prior))
    rng = np.random.default_rng(seed)
    draws = mu + np.exp(0.5 * logvar) * rng.standard_normal((n - 1, mu.size))
    return np.vstack([mu[None], draws]).astype(np.float64)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policies", type=int, default=10)
    ap.add_argument("--terrains", type=int, default=50)
    ap.add_argument("--first-seed", type=int, default=FIRST_SEED)
    ap.add_argument("--prior", default="quadruped", help="a shipped prior or .safetensors file")
    args = ap.parse_args(argv)
    thetas = policies(args.prior, args.policies)
    seeds = np.arange(args.first_seed, args.first_seed + args.terrains)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(2) as pool:
        (bullet, cpu_b), (mujoco, cpu_m) = pool.map(
            _costs, [("bullet", thetas, seeds), ("mujoco", thetas, seeds)])
    per_b, per_m = bullet.mean(axis=0), mujoco.mean(axis=0)
    diff = per_m - per_b
    out: dict[str, Any] = {
        "benchmark": "quadruped_crossval",
        "prior": args.prior,
        "policies": "the prior's mean and draws (seed 0)",
        "terrains": [int(seeds[0]), int(seeds[-1]) + 1],
        "bullet_mean_cost": round(float(bullet.mean()), 4),
        "mujoco_mean_cost": round(float(mujoco.mean()), 4),
        "overall_diff": round(float(mujoco.mean() - bullet.mean()), 4),
        "per_policy": [{"bullet": round(float(b), 4), "mujoco": round(float(m), 4),
                        "diff": round(float(d), 4)} for b, m, d in zip(per_b, per_m, diff,
                                                                       strict=True)],
        "max_abs_policy_diff": round(float(np.abs(diff).max()), 4),
        "per_policy_mean_correlation": round(float(np.corrcoef(per_b, per_m)[0, 1]), 3)
        if per_b.std() > 0 and per_m.std() > 0 else None,
        "pairs_within_0.05": round(float(np.mean(np.abs(mujoco - bullet) < 0.05)), 4),
        "goals": {"each_policy_within_0.05": bool(np.all(np.abs(diff) <= 0.05)),
                  "overall_within_0.03": bool(abs(mujoco.mean() - bullet.mean()) <= 0.03)},
        "cpu_s": {"bullet": round(cpu_b, 1), "mujoco": round(cpu_m, 1)},
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
