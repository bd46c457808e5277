"""report.md and figures for a finished run: the paper's Table 1 form, plus what it rests on.

Reads only the run directory (certificates, cost matrices, policies), so a report can be redrawn
at any time without rerunning anything.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pacplan.config import RunConfig, load_config
from pacplan.errors import PacplanError
from pacplan.files import atomic_save_npy, atomic_write_text, load_npy
from pacplan.pacbayes.certificate import Certificate, confidence_interval
from pacplan.run.figures import report_figures
from pacplan.run.rundir import RunDir
from pacplan.worlds.base import world_renderer


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


def _certificates(rd: RunDir) -> dict[int, Certificate]:
    files = rd.certificates()
    if not files:
        raise PacplanError(f"{rd.path} has no certificates yet; run `pacplan run` first")
    return {n: Certificate.load(f) for n, f in files.items()}


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


def _trajectories(rd: RunDir, cfg: RunConfig, last: Certificate) -> list[tuple[str, str]]:
    """Draw a few test environments flown by the posterior's most likely policy, if the world
    has a renderer in the registry."""
    count = cfg.report.trajectories
    render = world_renderer(cfg.world.name)
    if count <= 0 or render is None:
        return []
    best = int(np.argmax(last.p))
    theta_path = rd / RunDir.FIGURES / "most_likely_policy.npy"
    atomic_save_npy(theta_path, load_npy(rd / RunDir.POLICIES)[best])
    made = []
    for seed in range(cfg.seeds.test[0], cfg.seeds.test[0] + count):
        out = rd / RunDir.FIGURES / f"trajectory_seed{seed}.png"
        render(seed=seed, out=str(out), theta_path=str(theta_path),
               world_options=dict(cfg.world.options))
        made.append((f"Test environment {seed}, policy {best}", f"{RunDir.FIGURES}/{out.name}"))
    return made


def write_report(run_dir: str | Path) -> Path:
    """Write report.md (and figures/) for a run directory; returns the report's path."""
    rd = RunDir(run_dir)
    certs = _certificates(rd)
    cfg = load_config(rd / RunDir.CONFIG)
    baselines = {}
    for base in cfg.baselines:
        path = rd / RunDir.costs(f"baseline-{base.name}")
        if path.is_file():
            baselines[base.name] = load_npy(path)
    last = certs[max(certs)]
    cert = load_npy(rd / RunDir.costs("cert"))
    figures = report_figures(rd / RunDir.FIGURES, certs, cert)
    figures += _trajectories(rd, cfg, last)
    timings = rd / RunDir.TIMINGS
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
    test_path = rd / RunDir.costs("test")
    if baselines and test_path.is_file():
        lines += ["## Posterior against the baselines, environment by environment", "",
                  f"The posterior of N = {max(certs)} and each baseline on the same "
                  f"{len(load_npy(test_path))} test environments.", "",
                  paired_comparison(np.asarray(last.p), load_npy(test_path), baselines), ""]
    for title, rel in figures:
        lines += [f"## {title}", "", f"![{title}]({rel})", ""]
    if timings.is_file():
        lines += ["## Step wall times (s)", "", "```json", timings.read_text().strip(), "```", ""]
    path = rd / RunDir.REPORT
    atomic_write_text(path, "\n".join(lines))
    return path
