"""Old vs new ES settings for the UAV prior: training cost against wall time, one figure + JSON.

    python benchmarks/uav_es_compare.py [--run NAME=METRICS.jsonl ...] [--out PNG]

Reads ES training records (metrics.jsonl: per iteration the mean training cost, the rollouts
flown and the seconds the iteration took) and draws the training cost (a 20-iteration moving
average, as single iterations are noisy) against cumulative wall time, with the held-out cost
of the prior's mean where it was logged. Default records: the earlier shipped prior (`uav-v1`,
400 iterations), the same settings run for 3,000 iterations with the held-out evaluation on
(`uav-v1-long`: is it the settings or just the length?), and the taught paper-net prior (`uav`
in the figure: it was the shipped `uav` prior until issue 52; now `uav-paper-net`). All were
measured on this machine type (2 cores); the JSON says how many rollouts and seconds each took.
Default figure: presets/priors/uav-es-comparison.png.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from pacplan.es.checkpoint import read_metrics
from pacplan.io.plotting import pyplot, save_figure
from pacplan.presets import presets_dir

PRIORS_DIR = presets_dir() / "priors"
DATA = Path(__file__).parent / "data" / "uav-v1"
DEFAULT_RUNS = [f"uav-v1={DATA / 'uav-v1-metrics.jsonl'}",
                f"uav-v1-long={DATA / 'uav-v1-long-metrics.jsonl'}",
                f"uav={PRIORS_DIR / 'uav-paper-net-metrics.jsonl'}"]


def smooth(x: np.ndarray, w: int = 20) -> np.ndarray:
    """Trailing moving average (shorter windows at the start)."""
    c = np.cumsum(np.insert(x, 0, 0.0))
    i = np.arange(1, len(x) + 1)
    lo = np.maximum(0, i - w)
    return (c[i] - c[lo]) / (i - lo)


def summary(name: str, records: list[dict]) -> dict[str, object]:
    cost = np.array([r["cost"] for r in records])
    evals = [r for r in records if "eval_cost" in r]
    return {
        "prior": name,
        "iterations": len(records),
        "rollouts": int(sum(r["rollouts"] for r in records)),
        "wall_minutes": round(sum(r["seconds"] + r.get("eval_seconds", 0.0)
                                  for r in records) / 60, 1),
        "final_training_cost_last50": round(float(cost[-50:].mean()), 4),
        "final_held_out_mean_policy_cost": round(evals[-1]["eval_cost"], 4) if evals else None,
        "iterations_with_utility_shaping": int(sum(bool(r["utility"]) for r in records)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", help="NAME=path/to/metrics.jsonl (repeatable)")
    ap.add_argument("--out", type=Path, default=PRIORS_DIR / "uav-es-comparison.png")
    args = ap.parse_args()
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    rows = []
    for item in args.run or DEFAULT_RUNS:
        name, _, path = item.partition("=")
        recs = read_metrics(path)
        wall = np.cumsum([r["seconds"] + r.get("eval_seconds", 0.0) for r in recs]) / 60
        line, = ax.plot(wall, smooth(np.array([r["cost"] for r in recs])), lw=1.2,
                        label=f"{name}: training cost (20-it. mean)")
        ev = [(w, r["eval_cost"]) for w, r in zip(wall, recs) if "eval_cost" in r]
        if ev:
            ax.plot(*zip(*ev), ".", color=line.get_color(), ms=5,
                    label=f"{name}: prior mean, held-out environments")
        rows.append(summary(name, recs))
    ax.set_xlabel("wall time (minutes, 2-core machine)")
    ax.set_ylabel("cost")
    ax.set_ylim(0, 0.35)
    ax.legend(fontsize=8)
    ax.set_title("UAV prior training: earlier ES settings vs large-batch ES")
    save_figure(fig, args.out)
    print(json.dumps({"figure": str(args.out), "priors": rows}))


if __name__ == "__main__":
    main()
