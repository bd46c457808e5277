"""How much weight noise the quadruped's reference-gait policy tolerates: prints ONE JSON object.

    python benchmarks/quadruped_prior_sigma.py [--seeds 4] [--draws 4]

The ES starting mean of the quadruped-prior config (pacplan/presets/priors/) runs the reference
gait whatever the policy sees. Policies drawn around it with variance σ² react to their inputs
(motor velocities reach ≈ 10 rad/s), so σ decides how far the drawn policies stray from the gait.
This rolls out the mean and `draws` policies for each σ² on prior terrains 0..seeds-1
(2 processes) and reports the mean costs and their ratio to the mean policy's; it is the
measurement behind `init_var: 0.0001`.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp

import numpy as np

from pacplan.io.weights import load_theta
from pacplan.presets import PRIORS, presets_dir
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.policy import POLICY_DIM

INIT = presets_dir() / PRIORS / "quadruped-gait-init.safetensors"


def _cost(job: tuple[np.ndarray, int]) -> float:
    theta, seed = job
    return QuadrupedWorld().rollout(theta.astype(np.float32), seed).cost


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--draws", type=int, default=4)
    args = parser.parse_args()
    mu = load_theta(INIT, POLICY_DIM).astype(np.float64)
    rng = np.random.default_rng(0)
    groups = {"mean": [mu]}
    for var in (1e-4, 1e-3):
        groups[f"var_{var:g}"] = [mu + np.sqrt(var) * rng.standard_normal(POLICY_DIM)
                                  for _ in range(args.draws)]
    jobs = [(name, theta, seed) for name, thetas in groups.items() for theta in thetas
            for seed in range(args.seeds)]
    with mp.get_context("spawn").Pool(2) as pool:
        costs = pool.map(_cost, [(theta, seed) for _, theta, seed in jobs])
    means = {name: float(np.mean([c for (n, _, _), c in zip(jobs, costs, strict=True)
                                  if n == name])) for name in groups}
    print(json.dumps({
        "terrains": f"prior seeds 0..{args.seeds - 1}, 23.3°",
        "draws_per_variance": args.draws,
        "mean_cost": means,
        "ratio_to_mean_policy": {k: v / means["mean"] for k, v in means.items() if k != "mean"},
    }, indent=2))


if __name__ == "__main__":
    main()
