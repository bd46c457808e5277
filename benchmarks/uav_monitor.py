"""The ES-only UAV planner (results/uav-es) under its monitor: certified vs shifted worlds.

    python benchmarks/uav_monitor.py [--episodes 1500] [--alpha 0.01] [--figure PATH]

The planner of results/uav-es is used as certified: one policy drawn from the posterior p per
episode, flown in a fresh environment. On the certified world the costs are the run's test
matrix (results/uav-es/costs/test.npy: every policy flown on seeds 200000-204999, environments
the certificate never saw), read at the drawn policy: 5000 episodes. The shifted worlds are
flown here (UAVWorld options `obstacles`, `radius_scale`; eager kernels) on fresh seeds from
300000. For each world: the mean cost, the episode the monitor (`CertificateMonitor`, alpha)
alarms on in the flown order, and, to show the spread, the median and quartiles of the alarm
episode over 200 random orders of the same episodes. Prints one JSON object; --figure draws
the lower bound against episodes beside the certificate.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.pipeline.rundir import checked_policies
from pacplan.runtime.monitor import CertificateMonitor, log_evidence

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "results" / "uav-es"
SHIFTS: dict[str, dict[str, Any]] = {
    "25 obstacles": {"obstacles": 25},
    "30 obstacles": {"obstacles": 30},
    "radii x1.5": {"radius_scale": 1.5},
    "radii x2": {"radius_scale": 2.0},
}


def fly(options: dict[str, Any], seeds: np.ndarray, drawn: np.ndarray,
        thetas: np.ndarray) -> np.ndarray:
    """Cost of each episode: policy drawn[i] flown once in environment seeds[i]."""
    from pacplan.worlds.uav import UAVWorld

    world = UAVWorld(compile=False, **options)
    costs = np.empty(len(seeds))
    for j in np.unique(drawn):
        idx = np.flatnonzero(drawn == j)
        costs[idx] = world.costs(thetas[j : j + 1], seeds[idx])[:, 0]
    return costs


def watch(costs: np.ndarray, certified: float, alpha: float, rng: np.random.Generator
          ) -> dict[str, Any]:
    """The monitor on the flown order (lower bound trace) and alarm episodes over 200 orders."""
    monitor = CertificateMonitor(certified, alpha)
    lower = []
    for x in costs:
        monitor.update(float(x))
        lower.append(monitor.lower)
    orders = np.stack([rng.permutation(costs) for _ in range(200)])
    hit = log_evidence(orders, certified) >= np.log(1 / alpha)
    alarmed = hit.any(axis=1)
    first = np.where(alarmed, hit.argmax(axis=1) + 1, np.inf)
    q = np.percentile(first, [25, 50, 75], method="lower")  # no interpolation with inf
    return {"episodes": len(costs), "mean_cost": float(costs.mean()),
            "alarm_episode": monitor.alarm_episode, "lower_final": monitor.lower,
            "orders_alarmed": float(alarmed.mean()),
            "alarm_episode_quartiles": [None if not np.isfinite(v) else float(v) for v in q],
            "_lower": lower}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=1500, help="episodes per shifted world")
    ap.add_argument("--alpha", type=float, default=0.01)
    ap.add_argument("--figure", type=Path, default=None)
    args = ap.parse_args()
    cert = json.loads((RUN / "certificate.json").read_text())
    p = np.asarray(cert["p"], dtype=np.float64)
    certified = float(cert["certified"])
    thetas = checked_policies(RUN)
    test = np.load(RUN / "costs" / "test.npy")
    rng = np.random.default_rng(24)
    out: dict[str, Any] = {"certified": certified, "alpha": args.alpha, "worlds": {}}
    drawn = rng.choice(len(p), size=test.shape[0], p=p / p.sum())
    out["worlds"]["certified world"] = watch(test[np.arange(test.shape[0]), drawn], certified,
                                             args.alpha, rng)
    seeds = 300_000 + np.arange(args.episodes)
    for name, options in SHIFTS.items():
        t0 = time.perf_counter()
        drawn = rng.choice(len(p), size=len(seeds), p=p / p.sum())
        costs = fly(options, seeds, drawn, thetas)
        out["worlds"][name] = {"options": options, **watch(costs, certified, args.alpha, rng),
                               "fly_s": round(time.perf_counter() - t0, 1)}
    if args.figure is not None:
        draw(out, args.figure)
    for w in out["worlds"].values():
        w.pop("_lower")
    print(json.dumps(out, indent=1))


def draw(out: dict[str, Any], path: Path) -> None:
    """Lower bound vs episodes per world, the certified cost as a line, alarms marked."""
    from pacplan.io.plotting import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for name, w in out["worlds"].items():
        lower = np.asarray(w["_lower"])
        (line,) = ax.plot(np.arange(1, len(lower) + 1), lower,
                          label=f"{name} (mean {100 * w['mean_cost']:.1f} %)")
        if w["alarm_episode"] is not None:
            k = w["alarm_episode"]
            ax.plot([k], [lower[k - 1]], "o", color=line.get_color())
    ax.axhline(out["certified"], color="k", ls="--",
               label=f"certified {100 * out['certified']:.2f} %")
    ax.set_xscale("log")
    ax.set_xlabel("episode")
    ax.set_ylabel(f"lower bound on mean cost ({100 * (1 - out['alpha']):g} %, anytime)")
    ax.set_title("UAV planner (results/uav-es) monitored: alarm (dot) when the bound crosses")
    ax.legend(fontsize=8, loc="upper left")
    save_figure(fig, path)


if __name__ == "__main__":
    main()
