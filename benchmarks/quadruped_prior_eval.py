"""How good is a quadruped prior? Its mean and its draws on held-out terrains; ONE JSON object.

    nice python benchmarks/quadruped_prior_eval.py [--priors quadruped OTHER ...] [--terrains 500]

For each prior (a shipped name, a .safetensors file, or `paper`: the paper's own Minitaur prior,
`Weights/{mu,logvar}_minitaur_best.pt` as `pacplan data paper` stores them, the same 944-weight
net and inputs, its outputs reordered to pacplan's η by `pacplan.worlds.quadruped.paper_prior`):
the cost of its mean policy μ on every
terrain, and the cost of one fresh draw θ_i ∼ N(μ, σ²) per terrain i (draw i flies terrain i: the
mean of these is the prior's own expected cost, what the certificate's m policies average), on
the same `--terrains` terrains from seed 400,000 on — disjoint from every preset's prior-training,
held-out, certification and test seeds. The open-loop reference gait and the best constant gait
(the ES's starting mean, scripts/search_quadruped_gait.py) walk the same terrains as baselines, so
each prior's row carries a paired ratio to the reference gait (and, after the first prior, to that
prior). The world is the one the shipped prior was trained in: the Derpy in MuJoCo at 23.3°.
The paper's prior was trained in the paper's code, whose gait clock ran at twice the simulated
time (docs/worlds.md): here it walks pacplan's world, as any prior would.
"""

from __future__ import annotations

import argparse
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from pacplan.es.checkpoint import load_prior
from pacplan.io.paperdata import paper_data_dir
from pacplan.presets import resolve_prior
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.paper_prior import load_paper_prior

HELD_OUT_START = 400_000
OPTIONS = {"max_slope_deg": 23.3, "physics": "mujoco", "robot": "derpy"}
PRIORS_DIR = Path(__file__).resolve().parents[1] / "src" / "pacplan" / "presets" / "priors"
GAITS = {"reference-gait": PRIORS_DIR / "quadruped-gait-init.safetensors",
         "best-constant-gait": PRIORS_DIR / "quadruped-gait-best.safetensors"}


def _diagonal_costs(args: tuple[dict[str, Any], np.ndarray, np.ndarray]) -> np.ndarray:
    """Cost of policy i on terrain i, for each i (one rollout each), in a world of `options`."""
    options, thetas, seeds = args
    world = QuadrupedWorld(**options)
    return np.array([world.costs(t[None], s[None])[0, 0] for t, s in zip(thetas, seeds,
                                                                           strict=True)])


def fly_diagonal(options: dict[str, Any], thetas: np.ndarray, seeds: np.ndarray,
                 pool: ProcessPoolExecutor, workers: int) -> np.ndarray:
    """(n,) costs of policy i on terrain i, shared out over `workers` processes of `pool`
    (also used by quadruped_result_crossval.py)."""
    parts = [(options, thetas[w::workers], seeds[w::workers]) for w in range(workers)]
    out = np.empty(len(seeds))
    for w, res in enumerate(pool.map(_diagonal_costs, parts)):
        out[w::workers] = res
    return out


def _prior(name: str) -> tuple[np.ndarray, np.ndarray]:
    """(μ, log σ²) of a shipped prior, a .safetensors file, or `paper` (the paper's Minitaur
    prior from `pacplan data paper`'s folder, its outputs put in pacplan's order)."""
    if name != "paper":
        return load_prior(resolve_prior(name))
    folder = paper_data_dir()
    if folder is None:
        raise SystemExit("the paper's Minitaur prior is not here: run `pacplan data paper`")
    return load_paper_prior(folder)


def _summary(costs: np.ndarray, ref: np.ndarray | None) -> dict[str, Any]:
    row: dict[str, Any] = {"mean_cost": round(float(costs.mean()), 4),
                           "stderr": round(float(costs.std(ddof=1) / np.sqrt(costs.size)), 4),
                           "finished_share": round(float(np.mean(costs == 0.0)), 4)}
    if ref is not None:
        row["ratio_to_reference_gait"] = round(float(costs.mean() / ref.mean()), 4)
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--priors", nargs="+", default=["quadruped"])
    ap.add_argument("--terrains", type=int, default=500)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    seeds = np.arange(HELD_OUT_START, HELD_OUT_START + args.terrains, dtype=np.int64)
    t0 = time.perf_counter()
    out: dict[str, Any] = {"benchmark": "quadruped_prior_eval", "world": OPTIONS,
                           "terrains": [int(seeds[0]), int(seeds[-1]) + 1]}
    with ProcessPoolExecutor(args.workers) as pool:
        gaits = {}
        for name, path in GAITS.items():
            theta = load_file(str(path))["theta"].astype(np.float64)
            gaits[name] = fly_diagonal(OPTIONS, np.repeat(theta[None], len(seeds), axis=0),
                                       seeds, pool, args.workers)
        ref = gaits["reference-gait"]
        out["baselines"] = {name: _summary(c, ref) for name, c in gaits.items()}
        rows: list[dict[str, Any]] = []
        first: dict[str, np.ndarray] = {}
        for prior in args.priors:
            mu, logvar = _prior(prior)
            draws = mu + np.exp(0.5 * logvar) * np.random.default_rng(0).standard_normal(
                (len(seeds), mu.size))
            mean_costs = fly_diagonal(OPTIONS, np.repeat(mu[None], len(seeds), axis=0), seeds,
                                      pool, args.workers)
            draw_costs = fly_diagonal(OPTIONS, draws, seeds, pool, args.workers)
            row = {"prior": Path(prior).stem if Path(prior).is_file() else prior,
                   "sigma_mean": round(float(np.exp(0.5 * logvar).mean()), 5),
                   "mean_policy": _summary(mean_costs, ref),
                   "draws_one_per_terrain": _summary(draw_costs, ref)}
            if first:  # paired on the same terrains: this prior over the first one
                row["mean_policy"]["ratio_to_first_prior"] = round(
                    float(mean_costs.mean() / first["mean"].mean()), 4)
                row["draws_one_per_terrain"]["ratio_to_first_prior"] = round(
                    float(draw_costs.mean() / first["draws"].mean()), 4)
            else:
                first = {"mean": mean_costs, "draws": draw_costs}
            rows.append(row)
        out["priors"] = rows
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
