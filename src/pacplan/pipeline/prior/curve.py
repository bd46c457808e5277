"""The ES training curve figure (prior_training.png): drawn by training as it goes, redrawn by
the report. Written atomically; its iteration axis gets integer ticks only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pacplan.io.plotting import integer_ticks, pyplot, save_figure


def plot_training_curve(records: list[dict[str, Any]], out: str | Path) -> Path | None:
    """PNG of training cost, best cost and mean sigma per iteration (utility phases shaded)."""
    if not records:
        return None
    plt = pyplot()

    it = np.array([r["iteration"] for r in records])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(it, [r["cost"] for r in records], lw=1, label="training cost")
    ax.plot(it, [r["best"] for r in records], lw=1.5, label="best so far")
    if any("cost_ema" in r for r in records):
        ax.plot(it, [r.get("cost_ema", np.nan) for r in records], lw=1, label="moving average")
    evals = [r for r in records if "eval_cost" in r]
    if evals:
        ax.plot([r["iteration"] for r in evals], [r["eval_cost"] for r in evals], "k.-", lw=1,
                ms=4, label="prior mean, held-out")
    for r in records:
        if r["utility"]:
            ax.axvspan(r["iteration"] - 0.5, r["iteration"] + 0.5, color="orange", alpha=0.15,
                       lw=0)
    ax.set_xlabel("iteration")
    integer_ticks(ax.xaxis)
    ax.set_ylabel("cost")
    ax.set_ylim(0, 1)
    ax2 = ax.twinx()
    ax2.plot(it, [r["sigma_mean"] for r in records], color="gray", ls="--", lw=1,
             label="mean σ")
    ax2.set_ylabel("mean σ")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper right", fontsize=8)
    ax.set_title("ES prior training (shaded: rank-utility shaping on)")
    return save_figure(fig, out)
