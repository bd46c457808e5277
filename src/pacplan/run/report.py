"""report.md and figures for a finished run: the paper's Table 1 form, plus what it rests on.

Reads only the run directory (certificates, cost matrices, policies), so a report can be redrawn
at any time without rerunning anything.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import numpy as np

from pacplan.config import load_config
from pacplan.errors import PacplanError
from pacplan.pacbayes.certificate import Certificate, confidence_interval
from pacplan.run.rundir import load_npy


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


def _certificates(run_dir: Path) -> dict[int, Certificate]:
    folder = run_dir / "certificates"
    files = sorted(folder.glob("N*.json")) if folder.is_dir() else []
    if not files:
        raise PacplanError(f"{run_dir} has no certificates yet; run `pacplan run` first")
    certs = {int(f.stem[1:]): Certificate.load(f) for f in files}
    return dict(sorted(certs.items()))


def table1(certs: dict[int, Certificate], baselines: dict[str, np.ndarray]) -> str:
    """Markdown table in the form of the paper's Table 1, one row per N, then baseline rows."""
    lines = [
        "| N | Ĉ (train) | KL | McAllester | quadratic | kl-inverse | **certified** "
        "| test cost [99 % CI] | gap |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, c in certs.items():
        ci = f" [{_pct(c.test_ci[0])}, {_pct(c.test_ci[1])}]" if c.test_ci else ""
        gap = "—" if c.test_cost is None else f"{100 * (c.certified - c.test_cost):.2f} pts"
        lines.append(f"| {n} | {_pct(c.emp_cost)} | {c.kl:.3f} | {_pct(c.mcallester)} | "
                     f"{_pct(c.quadratic)} | {_pct(c.klinv)} | **{_pct(c.certified)}** | "
                     f"{_pct(c.test_cost)}{ci} | {gap} |")
    for name, costs in baselines.items():
        lo, hi = confidence_interval(costs[:, 0])
        lines.append(f"| baseline: {name} | — | — | — | — | — | — | {_pct(float(costs.mean()))} "
                     f"[{_pct(lo)}, {_pct(hi)}] | — |")
    return "\n".join(lines)


def paired_comparison(p: np.ndarray, test: np.ndarray, baselines: dict[str, np.ndarray],
                      resamples: int = 10_000) -> str:
    """Markdown table: the posterior against each baseline on the same test environments.

    Per environment, d = (posterior's expected cost) − (baseline's cost); the interval is a 99 %
    percentile bootstrap of mean(d) over environments (fixed seed, so a redrawn report is
    identical). Pairing removes the environment-to-environment spread that makes the two
    separate test-cost intervals overlap. Descriptive, not a certificate.
    """
    posterior = np.asarray(test, dtype=np.float64) @ np.asarray(p, dtype=np.float64)
    rng = np.random.default_rng(0)
    lines = [
        "| baseline | its test cost | posterior's | posterior − baseline [99 % paired bootstrap] "
        "| posterior better / worse / tied |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, costs in baselines.items():
        d = posterior - costs[:, 0]
        means = d[rng.integers(0, d.size, (resamples, d.size))].mean(axis=1)
        lo, hi = np.percentile(means, [0.5, 99.5])
        lines.append(f"| {name} | {_pct(float(costs.mean()))} | {_pct(float(posterior.mean()))} "
                     f"| {100 * d.mean():+.2f} pts [{100 * lo:+.2f}, {100 * hi:+.2f}] "
                     f"| {int((d < 0).sum())} / {int((d > 0).sum())} / {int((d == 0).sum())} |")
    return "\n".join(lines)


def _figures(run_dir: Path, certs: dict[int, Certificate]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig_dir = run_dir / "figures"
    fig_dir.mkdir(exist_ok=True)
    made: list[tuple[str, str]] = []

    def save(fig, name: str) -> str:
        fig.tight_layout()
        fig.savefig(fig_dir / name, dpi=110)
        plt.close(fig)
        return f"figures/{name}"

    ns = list(certs)
    last = certs[ns[-1]]

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for key, label in (("mcallester", "McAllester"), ("quadratic", "quadratic"),
                       ("klinv", "kl-inverse")):
        ax.plot(ns, [100 * getattr(certs[n], key) for n in ns], marker="o", label=label)
    if last.test_cost is not None:
        tc = [100 * certs[n].test_cost for n in ns]
        lo = [100 * certs[n].test_ci[0] for n in ns]
        hi = [100 * certs[n].test_ci[1] for n in ns]
        ax.plot(ns, tc, marker="s", color="k", label="test cost")
        ax.fill_between(ns, lo, hi, color="k", alpha=0.12, label="99 % CI")
    ax.set_xlabel("N (certification environments)")
    ax.set_ylabel("cost (%)")
    ax.set_title(f"bounds vs N (δ = {last.delta:g})")
    ax.legend(fontsize=8)
    made.append(("Bounds and test cost vs N", save(fig, "bounds_vs_n.png")))

    fig, ax = plt.subplots(figsize=(5.5, 3.0))
    ax.bar(np.arange(last.m), last.p, color="tab:blue")
    ax.axhline(1.0 / last.m, color="gray", ls="--", lw=1, label="prior p0 (uniform)")
    ax.set_xlabel("policy")
    ax.set_ylabel("posterior p")
    ax.set_title(f"posterior over the m = {last.m} policies (N = {last.n})")
    ax.legend(fontsize=8)
    made.append(("Posterior weights", save(fig, "posterior.png")))

    cert = load_npy(run_dir / "costs" / "cert.npy")[: last.n]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].hist(cert.mean(axis=0) * 100, bins=20, color="tab:orange")
    axes[0].set_xlabel("policy's empirical cost on S (%)")
    axes[0].set_ylabel("policies")
    per_env = cert @ np.asarray(last.p)
    axes[1].hist(per_env, bins=40, color="tab:green")
    axes[1].set_xlabel("posterior's cost per certification environment")
    axes[1].set_ylabel("environments")
    axes[1].set_yscale("log")
    fig.suptitle("cost distribution")
    made.append(("Cost distribution", save(fig, "costs.png")))
    return made


def _trajectories(run_dir: Path, last: Certificate, count: int) -> list[tuple[str, str]]:
    """Draw a few test environments flown by the posterior's most likely policy, if the world
    has a renderer (`pacplan.worlds.<name>.render.render_figure`)."""
    if count <= 0:
        return []
    cfg = load_config(run_dir / "config.yaml")
    try:
        module = importlib.import_module(f"pacplan.worlds.{cfg.world.name}.render")
    except ModuleNotFoundError:
        return []
    best = int(np.argmax(last.p))
    theta_path = run_dir / "figures" / "most_likely_policy.npy"
    np.save(theta_path, load_npy(run_dir / "policies.npy")[best], allow_pickle=False)
    made = []
    for seed in range(cfg.seeds.test[0], cfg.seeds.test[0] + count):
        out = run_dir / "figures" / f"trajectory_seed{seed}.png"
        module.render_figure(seed=seed, out=str(out), theta_path=str(theta_path),
                             world_options=dict(cfg.world.options))
        made.append((f"Test environment {seed}, policy {best}", f"figures/{out.name}"))
    return made


def write_report(run_dir: str | Path) -> Path:
    """Write report.md (and figures/) for a run directory; returns the report's path."""
    run_dir = Path(run_dir)
    certs = _certificates(run_dir)
    cfg = load_config(run_dir / "config.yaml")
    baselines = {}
    for base in cfg.baselines:
        path = run_dir / "costs" / f"baseline-{base.name}.npy"
        if path.is_file():
            baselines[base.name] = load_npy(path)
    last = certs[max(certs)]
    figures = _figures(run_dir, certs)
    figures += _trajectories(run_dir, last, cfg.report.trajectories)
    timings = run_dir / "timings.json"
    lines = [
        f"# pacplan report: {cfg.name}",
        "",
        f"World `{cfg.world.name}` {json.dumps(cfg.world.options) if cfg.world.options else ''}; "
        f"m = {last.m} policies drawn from the prior; δ = {last.delta:g}; posterior by "
        f"`{last.solver}` minimizing the `{last.bound}` bound. Seeds: prior "
        f"{list(cfg.seeds.prior)}, certification {last.provenance.get('seeds', {}).get('cert')}, "
        f"test {list(cfg.seeds.test)} (half-open, disjoint).",
        "",
        "With probability ≥ 1 − δ over the certification environments, the posterior's expected "
        "cost on new environments is at most the **certified** value (the smallest of the three "
        "bounds, which hold on the same event). The test cost is measured on held-out "
        "environments, with a 99 % Chernoff–kl interval.",
        "",
        table1(certs, baselines),
        "",
    ]
    test_path = run_dir / "costs" / "test.npy"
    if baselines and test_path.is_file():
        lines += ["## Posterior against the baselines, environment by environment", "",
                  f"The posterior of N = {max(certs)} and each baseline on the same "
                  f"{len(load_npy(test_path))} test environments.", "",
                  paired_comparison(np.asarray(last.p), load_npy(test_path), baselines), ""]
    for title, rel in figures:
        lines += [f"## {title}", "", f"![{title}]({rel})", ""]
    if timings.is_file():
        lines += ["## Step wall times (s)", "", "```json", timings.read_text().strip(), "```", ""]
    path = run_dir / "report.md"
    path.write_text("\n".join(lines))
    return path
