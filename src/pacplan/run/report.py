"""report.md and figures for a finished run: the paper's Table 1 form, plus what it rests on.

Reads only the run directory (certificates, cost matrices, policies), so a report can be redrawn
at any time without rerunning anything. It prints nothing it has not checked: every certificate
is verified (recomputed from its hash-checked matrices) and every matrix is read only after its
sha256 matches manifest.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pacplan.config import RunConfig, load_config
from pacplan.errors import PacplanError
from pacplan.files import atomic_save_npy, atomic_write_text, load_npy
from pacplan.pacbayes.certificate import confidence_interval
from pacplan.pacbayes.record import Certificate
from pacplan.run.figures import report_figures
from pacplan.run.provenance import verify_certificate
from pacplan.run.rundir import Manifest, RunDir
from pacplan.validation import check_unit_costs
from pacplan.worlds.base import world_renderer


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


def _certificates(rd: RunDir) -> dict[int, Certificate]:
    """Every certificate of the run, each verified (every number recomputed from its
    sha256-checked matrices, provenance checked against manifest.json) and filed under its N."""
    files = rd.certificates()
    if not files:
        raise PacplanError(f"{rd.path} has no certificates yet; run `pacplan run` first")
    certs = {}
    for n, path in files.items():
        c = verify_certificate(path)
        if c.n != n:
            raise PacplanError(f"{path} is filed as N = {n} but certifies N = {c.n}")
        certs[n] = c
    return certs


def _checked_matrix(rd: RunDir, manifest: Manifest, name: str) -> np.ndarray | None:
    """A finished array of the run, read only once its sha256 matches manifest.json (None if
    the run has none)."""
    path = rd / name
    if not path.is_file() and manifest.sha(name) is None:
        return None
    if not manifest.check(name):  # raises if changed or missing
        raise PacplanError(f"{name} in {rd.path} is not recorded in {RunDir.MANIFEST}, so its "
                           "content is unchecked; rerun `pacplan run` to finish the run")
    return load_npy(path, name=f"{name} in {rd.path}")


def _baselines(rd: RunDir, manifest: Manifest, cfg: RunConfig,
               test: np.ndarray | None) -> dict[str, np.ndarray]:
    """The baselines' hash-checked test columns, computed on the test matrix's environments."""
    test_seeds = manifest.inputs(RunDir.costs("test")).get("seeds")
    out = {}
    for base in cfg.baselines:
        name = RunDir.costs(f"baseline-{base.name}")
        costs = _checked_matrix(rd, manifest, name)
        if costs is None:
            continue
        seeds = manifest.inputs(name).get("seeds")
        if test is None or seeds != test_seeds:
            raise PacplanError(f"{name} in {rd.path} was computed on seeds {seeds!r}, the test "
                               f"matrix on {test_seeds!r}: a comparison needs the same ones")
        out[base.name], _ = check_unit_costs(costs, f"{name} in {rd.path}",
                                             shape=(test.shape[0], 1))
    return out


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


def _trajectories(rd: RunDir, manifest: Manifest, cfg: RunConfig, last: Certificate
                  ) -> list[tuple[str, str]]:
    """Draw a few test environments flown by the posterior's most likely policy (from the
    hash-checked policies), if the world has a renderer in the registry."""
    count, world = cfg.report.trajectories, _world(cfg, last)
    render = world_renderer(world["name"])
    if count <= 0 or render is None:
        return []
    first = (last.provenance.get("seeds") or {}).get("test", cfg.seeds.test)[0]
    best = int(np.argmax(last.p))
    theta_path = rd / RunDir.FIGURES / "most_likely_policy.npy"
    policies = _checked_matrix(rd, manifest, RunDir.POLICIES)
    if policies is None:
        raise PacplanError(f"{rd.path} has no {RunDir.POLICIES} to draw trajectories from")
    atomic_save_npy(theta_path, policies[best])
    made = []
    for seed in range(first, first + count):
        out = rd / RunDir.FIGURES / f"trajectory_seed{seed}.png"
        render(seed=seed, out=str(out), theta_path=str(theta_path),
               world_options=dict(world["options"]))
        made.append((f"Test environment {seed}, policy {best}", f"{RunDir.FIGURES}/{out.name}"))
    return made


def _world(cfg: RunConfig, last: Certificate) -> dict:
    """The world as the verified certificate records it (the config only for a certificate
    without provenance)."""
    return last.provenance.get("world") or {"name": cfg.world.name,
                                            "options": dict(cfg.world.options)}


def _header(cfg: RunConfig, last: Certificate) -> list[str]:
    """The report's opening: world, m, δ, solver and seeds, from the verified certificate."""
    world = _world(cfg, last)
    seeds = last.provenance.get("seeds") or {
        "prior": list(cfg.seeds.prior), "cert": [cfg.seeds.cert[0], cfg.seeds.cert[0] + last.n],
        "test": list(cfg.seeds.test)}
    return [
        f"# pacplan report: {cfg.name}",
        "",
        f"World `{world['name']}` {json.dumps(world['options']) if world['options'] else ''}; "
        f"m = {last.m} policies drawn from the prior; δ = {last.delta:g}; posterior by "
        f"`{last.solver}` minimizing the `{last.bound}` bound. Seeds: prior "
        f"{seeds['prior']}, certification {seeds['cert']}, test {seeds['test']} "
        "(half-open, disjoint).",
        "",
        "With probability ≥ 1 − δ over the certification environments, the posterior's expected "
        "cost on new environments is at most the **certified** value (the smallest of the three "
        "bounds, which hold on the same event). The test cost is measured on held-out "
        "environments, with a 99 % Chernoff–kl interval. Every certificate below was verified "
        "(`pacplan verify`) and every matrix checked against manifest.json before printing.",
        "",
    ]


def write_report(run_dir: str | Path) -> Path:
    """Write report.md (and figures/) for a run directory; returns the report's path.

    Everything printed is checked first: each certificate is verified and each matrix read
    only once its sha256 matches manifest.json, so an edited file stops the report instead of
    appearing in it.
    """
    rd = RunDir(run_dir)
    if not rd.path.is_dir():
        raise PacplanError(f"{rd.path} is not a run directory; run `pacplan run` first")
    with rd.locked():  # no run may change what the report is checking and printing
        return _write_report(rd)


def _write_report(rd: RunDir) -> Path:
    certs = _certificates(rd)
    last = certs[max(certs)]
    cfg = load_config(rd / RunDir.CONFIG)
    manifest = Manifest(rd.path)
    cert = _checked_matrix(rd, manifest, RunDir.costs("cert"))
    if cert is None:
        raise PacplanError(f"{rd.path} has no {RunDir.costs('cert')}; run `pacplan run` first")
    test = _checked_matrix(rd, manifest, RunDir.costs("test"))
    baselines = _baselines(rd, manifest, cfg, test)
    figures = report_figures(rd / RunDir.FIGURES, certs, cert)
    figures += _trajectories(rd, manifest, cfg, last)
    lines = [*_header(cfg, last), table1(certs, baselines), ""]
    if baselines and test is not None:
        lines += ["## Posterior against the baselines, environment by environment", "",
                  f"The posterior of N = {max(certs)} and each baseline on the same "
                  f"{len(test)} test environments.", "",
                  paired_comparison(np.asarray(last.p), test, baselines), ""]
    for title, rel in figures:
        lines += [f"## {title}", "", f"![{title}]({rel})", ""]
    timings = rd / RunDir.TIMINGS
    if timings.is_file():
        lines += ["## Step wall times (s)", "", "```json", timings.read_text().strip(), "```", ""]
    path = rd / RunDir.REPORT
    atomic_write_text(path, "\n".join(lines))
    return path
