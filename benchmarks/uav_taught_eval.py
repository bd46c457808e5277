"""Each stage of a taught UAV prior on held-out environments, one JSON line.

    python benchmarks/uav_taught_eval.py --distilled RUN/distill/theta.safetensors \
        --prior RUN/prior.safetensors [--baseline-prior uav-es] [--envs 2000] [--samples 50]
    python benchmarks/uav_taught_eval.py --redraw SAVED.json --figure OUT.png [--baseline-label L]

Rows, all on the same `--envs` environments of seeds.prior_eval (300,000 on: held out from
prior training, disjoint from certification and test seeds) and the same world (batched,
compiled, as the presets fly it): the privileged teacher (`planner: teacher`, the floor), the
Depth Filter alone, the distilled net (ES's start), and for the taught prior and the baseline
prior (default: the shipped `uav-es`) the mean policy μ and `--samples` draws from N(μ, σ²) (seed
0, as a run's m policies are drawn). `ratio_*`: the taught prior's cost over the baseline
prior's, measured in this same run. Each prior flies the policy family its file records (world
options `policy`, `policy_width`; the paper's net when it records none), so a conv prior is
compared with a paper-net one on the same environments. `--redraw` draws the figure of a saved
line again without rolling anything out (`--baseline-label` names its baseline, e.g. a prior
since replaced).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from pacplan.es.checkpoint import read_prior_file
from pacplan.io.weights import load_theta
from pacplan.presets import resolve_prior
from pacplan.worlds.uav import UAVWorld

HELD_OUT_START = 300_000


def _timed(fn: object) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    out = fn()  # type: ignore[operator]
    return out, round(time.perf_counter() - t0, 1)


def prior_world(prior: str) -> UAVWorld:
    """The world a prior's policies fly in: the UAV with the policy family its file records it
    was trained in (`policy`, `policy_width`; none recorded: the paper's net), compiled."""
    world = read_prior_file(resolve_prior(prior)).world or {}
    options = world.get("options") or {}
    family = {k: options[k] for k in ("policy", "policy_width") if k in options}
    return UAVWorld(simulator="batched", compile=True, **family)


def prior_row(world: UAVWorld, prior: str, seeds: np.ndarray, samples: int) -> dict[str, object]:
    p = read_prior_file(resolve_prior(prior))
    mu, logvar = p.mu, p.logvar
    draws = np.random.default_rng(0).standard_normal((samples, mu.size))
    thetas = np.vstack([mu, mu + np.exp(0.5 * logvar) * draws]).astype(np.float32)
    costs, secs = _timed(lambda: world.costs(thetas, seeds))
    per_policy = costs.mean(axis=0)
    return {"prior": Path(prior).stem if Path(prior).is_file() else prior,
            "mean_policy_cost": round(float(per_policy[0]), 4),
            "draws_mean_cost": round(float(per_policy[1:].mean()), 4),
            "draws_best_cost": round(float(per_policy[1:].min()), 4),
            "draws_worst_cost": round(float(per_policy[1:].max()), 4),
            "sigma_mean": round(float(np.exp(0.5 * logvar).mean()), 4), "seconds": secs,
            "family": world.family.label(), "weights": int(mu.size)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--distilled", help="the distilled θ (.safetensors)")
    ap.add_argument("--prior", help="the taught prior (name or file)")
    ap.add_argument("--baseline-prior", default="uav-es")
    ap.add_argument("--envs", type=int, default=2000)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--figure", help="also draw the cost per stage (a .png)")
    ap.add_argument("--redraw", help="a saved output line (.json): only draw --figure from it")
    ap.add_argument("--baseline-label", help="the baseline's name in the figure")
    args = ap.parse_args()
    if args.redraw:
        if not args.figure:
            ap.error("--redraw needs --figure")
        stages_figure(json.loads(Path(args.redraw).read_text()), args.figure,
                      args.baseline_label)
        return
    if not (args.distilled and args.prior):
        ap.error("--distilled and --prior are required (or --redraw)")
    seeds = np.arange(HELD_OUT_START, HELD_OUT_START + args.envs, dtype=np.int64)
    world = prior_world(args.prior)  # the taught prior's family: its distilled start's too
    zero = np.zeros((1, world.policy_dim()), np.float32)
    opts = world.options()  # θ is ignored by these two rows, but has the family's size
    teacher, t_teacher = _timed(lambda: UAVWorld(**{**opts, "planner": "teacher"})
                                .costs(zero, seeds))
    filt, t_filt = _timed(lambda: UAVWorld(**{**opts, "use_net": False}).costs(zero, seeds))
    theta = load_theta(args.distilled, world.policy_dim())[None]
    dist, t_dist = _timed(lambda: world.costs(theta, seeds))
    taught = prior_row(world, args.prior, seeds, args.samples)
    base = prior_row(prior_world(args.baseline_prior), args.baseline_prior, seeds, args.samples)
    out = {
        "envs": args.envs, "seeds": [HELD_OUT_START, HELD_OUT_START + args.envs],
        "samples": args.samples,
        "teacher": {"cost": round(float(teacher.mean()), 4),
                    "collided": int((teacher > 0).sum()), "seconds": t_teacher},
        "depth_filter": {"cost": round(float(filt.mean()), 4), "seconds": t_filt},
        "distilled": {"cost": round(float(dist.mean()), 4), "seconds": t_dist},
        "taught_prior": taught, "baseline_prior": base,
        "ratio_mean_policy": round(taught["mean_policy_cost"] / base["mean_policy_cost"], 3),
        "ratio_draws": round(taught["draws_mean_cost"] / base["draws_mean_cost"], 3),
    }
    if args.figure:
        stages_figure(out, args.figure, args.baseline_label)
    print(json.dumps(out))


def stages_figure(out: dict, path: str, baseline_label: str | None = None) -> None:
    """Bars: held-out cost of each stage, from the Depth Filter to the teacher's floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t, b = out["taught_prior"], out["baseline_prior"]
    base = baseline_label or b["prior"]
    bars = [("Depth Filter\nalone", out["depth_filter"]["cost"]),
            (f"baseline prior\n({base}) μ", b["mean_policy_cost"]),
            (f"baseline prior\n{out['samples']} draws", b["draws_mean_cost"]),
            ("distilled net\n(ES start)", out["distilled"]["cost"]),
            ("taught prior\nμ (after ES)", t["mean_policy_cost"]),
            (f"taught prior\n{out['samples']} draws", t["draws_mean_cost"]),
            ("teacher\n(sees all)", out["teacher"]["cost"])]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    colors = ["#999999", "#8da0cb", "#8da0cb", "#fc8d62", "#66c2a5", "#66c2a5", "#333333"]
    ax.bar(range(len(bars)), [100 * v for _, v in bars], color=colors)
    for i, (_, v) in enumerate(bars):
        ax.text(i, 100 * v + 0.3, f"{100 * v:.2f} %", ha="center", fontsize=8)
    ax.set_xticks(range(len(bars)), [n for n, _ in bars], fontsize=8)
    ax.set_ylabel("mean cost (%)")
    ax.set_title(f"UAV: cost per stage on {out['envs']} held-out environments "
                 f"(seeds {out['seeds'][0]}–{out['seeds'][1] - 1})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
