"""Can the paper-code net's camera tell a steep first tent apart before the first step? ONE JSON.

    nice -n 10 python benchmarks/quadruped_steep_visible.py [--terrains 3000] [--first-seed 0]
        [--physics bullet] [--test-share 0.3]

Why: the climbing opening (`worlds/quadruped/opening.py`) has to follow what the camera sees:
run on every terrain it costs the ordinary ones dearly. This checks that the first observation
carries what it needs: the first depth image (and, as the baseline, the 22 proprioceptive
values alone) of `--terrains` prior-training terrains after the paper code's settling, a
logistic regression (L2, fitted by L-BFGS on standardised inputs) on the first
1 − `--test-share` of them predicting the `steep` stratum (first tent ≥ 20°), scored on the
rest: ROC AUC, accuracy, recall and false-positive rate at probability 0.5, for each input:
the image clipped at 5 m, the image through the twin-trained `quadruped-paper-code-twin` prior's own
convolution (the 200 features its net sees), all 22 proprioceptive values, the 16 motor angles
and velocities alone, and the torso's position and attitude alone; the baseline is chance (AUC
0.5), each input's AUC is also given as a ratio over it.

Measured (PyBullet, 3000 terrains, 900 scored, 2026-12-02; 0.09 CPU s a terrain): the image,
the prior's features, the 22 proprioceptive values and the 16 motor values alone each separate
the steep stratum with AUC 1.000 (accuracy 0.998–0.999), the torso alone with 0.9998: the
settled robot's legs already stand against a steep first tent
(benchmarks/data/quadruped-steep-visible.json).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
from scipy.optimize import minimize
from scipy.special import expit

from pacplan.es.checkpoint import load_prior
from pacplan.presets import resolve_prior
from pacplan.worlds.base import stratum_members
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.policy import depth_features, unpack

L2 = 1e-3
CLIP_M = 5.0  # beyond the terrain the camera sees the sky (999 m): clipped for a linear fit


def first_observations(options: dict[str, Any], seeds: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:
    """(depth (n, 50, 50), proprio (n, 22)) at the first decision of each terrain."""
    world = QuadrupedWorld(**options)
    sim = world.sim
    depth, proprio = [], []
    for s in seeds:
        sim.reset(world.terrain(int(s)))
        depth.append(sim.depth_image().astype(np.float64))
        proprio.append(sim.proprioception().astype(np.float64))
    world.close()
    return np.array(depth), np.array(proprio)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = L2) -> np.ndarray:
    """Weights (last: intercept) of an L2-penalised logistic regression."""
    xb = np.hstack([x, np.ones((len(x), 1))])

    def loss(w: np.ndarray) -> tuple[float, np.ndarray]:
        z = xb @ w
        grad = xb.T @ (expit(z) - y) / len(y)
        grad[:-1] += 2 * l2 * w[:-1]
        return float(np.mean(np.logaddexp(0, z) - y * z) + l2 * (w[:-1] ** 2).sum()), grad

    return minimize(loss, np.zeros(xb.shape[1]), jac=True, method="L-BFGS-B",
                    options={"maxiter": 5000}).x


def roc_auc(score: np.ndarray, y: np.ndarray) -> float:
    """The probability that a random positive scores above a random negative (ties half)."""
    order = np.argsort(score, kind="stable")
    ranks = np.empty(len(score))
    ranks[order] = np.arange(1, len(score) + 1)
    for v in np.unique(score):  # average ranks of ties
        tied = score == v
        ranks[tied] = ranks[tied].mean()
    n1 = int(y.sum())
    n0 = len(y) - n1
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def score(x: np.ndarray, y: np.ndarray, train: np.ndarray) -> dict[str, float]:
    """Fit on `train`, score on the rest."""
    mean, sd = x[train].mean(axis=0), x[train].std(axis=0)
    sd[sd < 1e-9] = 1.0
    xs = (x - mean) / sd
    w = fit_logistic(xs[train], y[train])
    test = ~train
    s = np.hstack([xs[test], np.ones((test.sum(), 1))]) @ w
    pred, yt = s > 0, y[test] == 1
    return {"auc": round(roc_auc(s, y[test]), 4), "accuracy": round(float(np.mean(pred == yt)), 4),
            "recall": round(float(pred[yt].mean()), 4),
            "false_positive_rate": round(float(pred[~yt].mean()), 4)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--terrains", type=int, default=3000)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--physics", choices=("bullet", "mujoco"), default="bullet")
    ap.add_argument("--test-share", type=float, default=0.3)
    args = ap.parse_args(argv)
    options = {"variant": "paper-code", "physics": args.physics}
    seeds = np.arange(args.first_seed, args.first_seed + args.terrains, dtype=np.int64)
    y = stratum_members(QuadrupedWorld(**options), "steep", seeds).astype(np.float64)
    t0 = time.process_time()
    depth, proprio = first_observations(options, seeds)
    cpu = time.process_time() - t0
    mu, _ = load_prior(resolve_prior("quadruped-paper-code-twin"))  # the recorded run's
    w = unpack(mu)
    inputs = {"depth_clipped": np.minimum(depth, CLIP_M).reshape(len(seeds), -1),
              "prior_conv_features": np.array([depth_features(w, d) for d in depth]),
              "proprio": proprio, "motors": proprio[:, :16], "torso": proprio[:, 16:]}
    train = np.arange(len(seeds)) < round((1 - args.test_share) * len(seeds))
    got = {name: score(x, y, train) for name, x in inputs.items()}
    out = {"benchmark": "quadruped_steep_visible", "world": options,
           "terrains": [int(seeds[0]), int(seeds[-1]) + 1], "steep_share": round(y.mean(), 4),
           "test_terrains": int((~train).sum()), "l2": L2, "inputs": got,
           "baseline": "chance, AUC 0.5",
           "auc_over_chance": {n: round(g["auc"] / 0.5, 3) for n, g in got.items()},
           "cpu_s_per_first_observation": round(cpu / len(seeds), 4)}
    print(json.dumps(out))
    return out


if __name__ == "__main__":
    main()
