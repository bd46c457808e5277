"""The report's matplotlib figures: bounds vs N, the posterior's weights, the cost distributions
(the ES training curve, drawn while training runs, is `pacplan.pipeline.prior.curve`).

Figures are written atomically (a killed report leaves the old PNG or the new one). Counted
axes (iterations, policy indices, numbers of policies) get integer ticks only. The bounds-vs-N
axis spans the run's own N: the paper's Table 1 points inside that span are drawn, the others
are listed beside the plot instead of stretching the axis away from the run's points.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pacplan.io.plotting import integer_ticks, pyplot, save_figure
from pacplan.pacbayes.posterior import mixture_costs
from pacplan.pacbayes.record import Certificate


def report_figures(fig_dir: Path, certs: dict[int, Certificate], cert: np.ndarray,
                   paper: dict[int, float] | None = None) -> list[tuple[str, str]]:
    """The report's figures in `fig_dir`: bounds vs N, posterior weights, cost distributions.

    `cert` is the certification matrix; `paper` (N -> the bound the paper's Table 1 reports)
    adds those points to the bounds plot, marked as the paper's own world and prior. Returns
    (title, path relative to the run) pairs.
    """
    plt = pyplot()
    made: list[tuple[str, str]] = []

    def save(fig: Any, name: str) -> str:
        save_figure(fig, fig_dir / name)
        return f"{fig_dir.name}/{name}"

    ns = list(certs)
    last = certs[ns[-1]]

    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    for key, label in (("mcallester", "McAllester"), ("quadratic", "quadratic"),
                       ("klinv", "kl-inverse")):
        ax.plot(ns, [100 * getattr(certs[n], key) for n in ns], marker="o", label=label)
    if last.test_cost is not None:
        tc = [100 * certs[n].test_cost for n in ns]
        lo = [100 * certs[n].test_ci[0] for n in ns]
        hi = [100 * certs[n].test_ci[1] for n in ns]
        ax.plot(ns, tc, marker="s", color="k", label="test cost")
        ax.fill_between(ns, lo, hi, color="k", alpha=0.12, label="99 % CI")
    log = ns[-1] >= 20 * ns[0]  # N over decades (uav-tight: 1000 to 100,000)
    if paper:
        _paper_points(ax, paper, ns[0], ns[-1])
    if log:
        ax.set_xscale("log")
    ax.set_xlim(*_n_range(ns[0], ns[-1], log))
    ax.set_xlabel("N (certification environments)")
    ax.set_ylabel("cost (%)")
    if ax.get_ylim()[1] > 100:  # a cost is at most 100 %: a bound above says nothing there
        ax.set_ylim(top=100)
    ax.set_title(f"bounds vs N (δ = {last.delta:g})")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    made.append(("Bounds and test cost vs N", save(fig, "bounds_vs_n.png")))

    fig, ax = plt.subplots(figsize=(5.5, 3.0))
    ax.bar(np.arange(last.m), last.p, color="tab:blue")
    integer_ticks(ax.xaxis)
    ax.axhline(1.0 / last.m, color="gray", ls="--", lw=1, label="prior p0 (uniform)")
    ax.set_xlabel("policy")
    ax.set_ylabel("posterior p")
    ax.set_title(f"posterior over the m = {last.m} policies (N = {last.n})")
    ax.legend(fontsize=8)
    made.append(("Posterior weights", save(fig, "posterior.png")))

    cert = cert[: last.n]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].hist(cert.mean(axis=0) * 100, bins=20, color="tab:orange")
    axes[0].set_xlabel("policy's empirical cost on S (%)" if last.columns is None else
                       f"empirical cost on S of the {len(last.columns)} screened policies (%)")
    axes[0].set_ylabel("policies")
    integer_ticks(axes[0].yaxis)
    per_env = mixture_costs(cert, last.matrix_p())
    axes[1].hist(per_env, bins=40, color="tab:green")
    axes[1].set_xlabel("posterior's cost per certification environment")
    axes[1].set_ylabel("environments")
    axes[1].set_yscale("log")
    fig.suptitle("cost distribution")
    made.append(("Cost distribution", save(fig, "costs.png")))
    return made


def _n_range(lo: int, hi: int, log: bool) -> tuple[float, float]:
    """The x-range of the bounds-vs-N plot: the run's N, with a margin (a single N centred)."""
    if log:
        return lo / 1.25, hi * 1.25
    pad = 0.05 * (hi - lo) if hi > lo else 0.1 * hi
    return lo - pad, hi + pad


def _paper_points(ax: Any, paper: dict[int, float], lo: int, hi: int) -> None:
    """The paper's Table 1 bounds: those at an N within the run's span as points, the others
    as a note beside the plot (they would otherwise stretch the axis)."""
    inside = sorted(n for n in paper if lo <= n <= hi)
    outside = sorted(n for n in paper if not lo <= n <= hi)
    label = "paper's Table 1 (its world, prior)"
    if inside:
        ax.plot(inside, [100 * paper[n] for n in inside], ls="none", marker="*", ms=10,
                color="tab:red", label=label)
    if outside:
        lines = [f"N = {n:,}: {100 * paper[n]:.2f} %" for n in outside]
        ax.text(1.02, 0.0, ("also in the paper's Table 1:\n" if inside else label + ":\n")
                + "\n".join(lines), transform=ax.transAxes, fontsize=7, va="bottom",
                ha="left", color="tab:red")
