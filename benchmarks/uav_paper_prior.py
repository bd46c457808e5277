"""The paper's own UAV prior flown in pacplan's world beside pacplan's ES-only prior: one JSON line.

    python benchmarks/uav_paper_prior.py [--envs 2000] [--draws 50] [--first-seed 400000]

The paper's published prior (μ, logvar of its ES; `pacplan data paper` fetches it, or set
PACPLAN_PAPER_DATA) is mapped into pacplan's net (`pacplan.worlds.uav.paper_prior`: depth in
metres, scores × 1000, outputs in image-grid order) and flown as its mean policy and as the
`--draws` policies its code drew (`torch.manual_seed(0)`), twice: with pacplan's Depth Filter
cells (the paper's net in pacplan's policy) and with the paper's grid of cells (the paper's
policy exactly). Beside them, on the same environments: pacplan's ES-only prior `uav-es`, its mean
and `--draws` policies drawn as `pacplan run` draws them (seed 0), and the Depth Filter alone
with either cell layout. Environments start at seed 400,000, disjoint from every preset's seeds.
The ratios compare the paper's prior with pacplan's on the same environments.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacplan import portable
from pacplan.es.checkpoint import load_prior
from pacplan.io.paperdata import paper_data_dir
from pacplan.presets import resolve_prior
from pacplan.worlds.uav import UAVWorld
from pacplan.worlds.uav import paper_prior as pp
from pacplan.worlds.uav.policy import FilterCells

FIRST_SEED = 400_000


def _world(net_scale: float, paper_cells: bool, use_net: bool = True) -> UAVWorld:
    """The batched, compiled world as the presets fly it; optionally the paper's filter cells."""
    world = UAVWorld(simulator="batched", compile=True, net_scale=net_scale, use_net=use_net)
    if paper_cells:
        world.sim.cells = FilterCells(world.sim.device, pp.paper_filter_cells())
    return world


def _summary(costs: np.ndarray) -> dict[str, Any]:
    """Column 0 is the mean policy, the rest the draws."""
    per_policy = costs.mean(axis=0)
    out: dict[str, Any] = {"mean_policy_cost": round(float(per_policy[0]), 4)}
    if costs.shape[1] > 1:
        draws = per_policy[1:]
        out.update(draws_mean_cost=round(float(draws.mean()), 4),
                   draws_best_cost=round(float(draws.min()), 4),
                   draws_worst_cost=round(float(draws.max()), 4))
    return out


def _paired(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    """Mean of a − b per environment with a normal 95 % interval, and the ratio of the means."""
    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    half = 1.96 * float(d.std(ddof=1)) / math.sqrt(len(d))
    return {"difference": round(float(d.mean()), 4),
            "difference_95ci": [round(float(d.mean()) - half, 4), round(float(d.mean()) + half, 4)],
            "ratio": round(float(np.mean(a)) / max(float(np.mean(b)), 1e-12), 3)}


def _ours(draws: int) -> np.ndarray:
    """The ES-only prior's (`uav-es`, the paper comparison's) mean and `draws` policies as
    `pacplan run` draws them (seed 0)."""
    mu, logvar = load_prior(resolve_prior("uav-es"))
    sigma = portable.exp(0.5 * logvar.astype(np.float64))
    eps = np.random.default_rng(0).standard_normal((draws, mu.size))
    return np.vstack([mu[None], (mu.astype(np.float64) + sigma * eps)]).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", type=int, default=2000)
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--first-seed", type=int, default=FIRST_SEED)
    args = ap.parse_args()
    directory = paper_data_dir()
    if directory is None:
        raise SystemExit("the paper's prior is not here: run `pacplan data paper` "
                         "(or set PACPLAN_PAPER_DATA)")
    mu, logvar = pp.load_paper_prior(directory)
    paper = pp.to_pacplan(np.vstack([mu[None], pp.paper_draws(mu, logvar, args.draws)]))
    seeds = np.arange(args.first_seed, args.first_seed + args.envs, dtype=np.int64)
    t0 = time.perf_counter()
    c_paper = _world(pp.PAPER_NET_SCALE, False).costs(paper, seeds)
    c_paper_grid = _world(pp.PAPER_NET_SCALE, True).costs(paper, seeds)
    c_ours = _world(5.0, False).costs(_ours(args.draws), seeds)
    none = np.zeros((1, paper.shape[1]), np.float32)
    c_filter = _world(5.0, False, use_net=False).costs(none, seeds)[:, 0]
    c_filter_grid = _world(5.0, True, use_net=False).costs(none, seeds)[:, 0]
    seconds = time.perf_counter() - t0
    rollouts = c_paper.size + c_paper_grid.size + c_ours.size + 2 * len(seeds)
    print(json.dumps({
        "envs": args.envs, "seeds": [int(seeds[0]), int(seeds[-1]) + 1], "draws": args.draws,
        "paper_data": str(Path(directory)),
        "paper_prior_pacplan_cells": _summary(c_paper),
        "paper_prior_paper_cells": _summary(c_paper_grid),
        "pacplan_prior_uav": _summary(c_ours),
        "depth_filter_only": {"pacplan_cells": round(float(c_filter.mean()), 4),
                              "paper_cells": round(float(c_filter_grid.mean()), 4)},
        "paper_over_pacplan": {
            "mean_policy": _paired(c_paper[:, 0], c_ours[:, 0]),
            "draws": _paired(c_paper[:, 1:].mean(1), c_ours[:, 1:].mean(1)),
            "mean_policy_paper_cells": _paired(c_paper_grid[:, 0], c_ours[:, 0]),
            "draws_paper_cells": _paired(c_paper_grid[:, 1:].mean(1), c_ours[:, 1:].mean(1)),
        },
        "rollouts": int(rollouts), "seconds": round(seconds, 1),
        "rollouts_per_s": round(rollouts / seconds, 1),
    }))


if __name__ == "__main__":
    main()
