"""report.md, report.html and figures for a finished run: the paper's Table 1 form, plus what
it rests on.

Reads only the run directory (certificates, cost matrices, policies, the prior and its training
metrics, timings), so a report can be redrawn at any time without rerunning anything. It prints
nothing it has not checked: every certificate is verified (recomputed from its hash-checked
matrices) and every matrix, the policies and the prior are read only after their sha256 matches
manifest.json. What is for people only (metrics.jsonl, timings.json, a shipped prior's training
record, crossval/*.json) is labelled as such, and a field of it is quoted only once its type and
range are checked. A string from outside (a file name, a config value, a JSON field) is written
with `pacplan.report.markdown` (`text`, `code`): it shows as its own characters and can never
become a link, an image, emphasis, HTML or a new table cell.

report.html is the same Markdown rendered by `pacplan.report.html`, figures embedded: one
file to share.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from pacplan.config import RunConfig, load_config
from pacplan.errors import PacplanError
from pacplan.io.files import (
    atomic_save_npy,
    atomic_write_text,
)
from pacplan.io.outputs import folder_kind
from pacplan.io.paperdata import MINITAUR_PRIOR_SHA256
from pacplan.pacbayes.matrices import matrix_from_bytes
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.provenance import verify_certificate
from pacplan.pipeline.rundir import Manifest, RunDir, read_timings, timing_number
from pacplan.report.crossval import crossval_section
from pacplan.report.figures import report_figures
from pacplan.report.html import markdown_to_html
from pacplan.report.markdown import code, text
from pacplan.report.prior import prior_section
from pacplan.report.tables import (
    paired_comparison,
    paper_bounds,
    paper_column_head,
    paper_figures,
    paper_note,
    returns_table,
    table1,
    timing_table,
    whole_count,
)
from pacplan.validation import check_unit_costs
from pacplan.worlds.base import return_range, world_renderer


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
    the run has none); a rational cost matrix decoded to float64."""
    data = manifest.read_finished(name)
    return None if data is None else matrix_from_bytes(data, f"{name} in {rd.path}")


def _costs(cfg: RunConfig, role: str) -> str:
    """The manifest name of a cost matrix of this run (rational with storage.cost_denominator)."""
    return RunDir.costs(role, rational=cfg.storage.cost_denominator is not None)


def _baselines(rd: RunDir, manifest: Manifest, cfg: RunConfig,
               test: np.ndarray | None) -> dict[str, np.ndarray]:
    """The baselines' hash-checked test columns, computed on the test matrix's environments
    (a baseline with `envs`: on its first ones, which its row and paired comparison then use)."""
    test_seeds = manifest.inputs(_costs(cfg, "test")).get("seeds")
    out = {}
    for base in cfg.baselines:
        name = _costs(cfg, f"baseline-{base.name}")
        costs = _checked_matrix(rd, manifest, name)
        if costs is None:
            continue
        seeds = manifest.inputs(name).get("seeds")
        prefix = (isinstance(seeds, list) and isinstance(test_seeds, list) and len(seeds) == 2
                  and seeds[0] == test_seeds[0] and seeds[0] < seeds[1] <= test_seeds[1])
        if test is None or not (seeds == test_seeds or (base.envs is not None and prefix)):
            raise PacplanError(f"{name} in {rd.path} was computed on seeds {seeds!r}, the test "
                               f"matrix on {test_seeds!r}: a comparison needs the same ones")
        rows = test.shape[0] if seeds == test_seeds else int(seeds[1] - seeds[0])
        out[base.name], _ = check_unit_costs(costs, f"{name} in {rd.path}", shape=(rows, 1))
    return out


# ---------------------------------------------------------------------- the paper's figures
def choose_trajectories(costs: np.ndarray, count: int) -> list[int]:
    """Which test environments (row indices) to draw for one policy's column of test costs:
    failures (cost > 0) and successes (cost 0), deterministically.

    ⌊(count + 1) / 3⌋ successes and the rest failures (3 → 2 failures + 1 success, 2 → 1 + 1,
    1 → 1 failure), the first of each kind in seed order; when one kind runs short the other
    fills in. Failures come first.
    """
    costs = np.asarray(costs, dtype=np.float64).reshape(-1)
    count = max(0, min(int(count), costs.size))
    fails, wins = np.flatnonzero(costs > 0), np.flatnonzero(costs <= 0)
    n_win = min((count + 1) // 3, wins.size)
    n_fail = min(count - n_win, fails.size)
    n_win = min(count - n_fail, wins.size)
    return [int(i) for i in fails[:n_fail]] + [int(i) for i in wins[:n_win]]


def _trajectories(rd: RunDir, manifest: Manifest, cfg: RunConfig, last: Certificate,
                  test: np.ndarray | None) -> list[str]:
    """Draw the posterior's most likely policy (from the hash-checked policies) in test
    environments where it failed and where it succeeded (`choose_trajectories`, from the
    hash-checked test matrix), if the world has a renderer in the registry."""
    count, world = cfg.report.trajectories, _world(cfg, last)
    render = world_renderer(world["name"])
    if count <= 0 or render is None:
        return []
    policies = _checked_matrix(rd, manifest, RunDir.POLICIES)
    if policies is None:
        raise PacplanError(f"{rd.path} has no {RunDir.POLICIES} to draw trajectories from")
    recorded = manifest.inputs(_costs(cfg, "test")).get("seeds")
    first = int((recorded or (last.provenance.get("seeds") or {}).get("test")
                 or cfg.seeds.test)[0])
    best = int(np.argmax(last.p))
    fig_dir = rd / RunDir.FIGURES
    theta_path = fig_dir / "most_likely_policy.npy"
    atomic_save_npy(theta_path, policies[best])
    lines = ["## Trajectories of the most likely policy", ""]
    if test is None:
        picks = [(i, None) for i in range(count)]
        lines += [f"Policy {best} (posterior weight {last.p[best]:.3f}) in the first {count} test "
                  "environments, drawn again from the stored policy.", ""]
    else:
        column = test[:, last.matrix_column(best)]
        picks = [(i, float(column[i])) for i in choose_trajectories(column, count)]
        fails = sum(1 for _, c in picks if c > 0)
        lines += [f"Policy {best} (posterior weight {last.p[best]:.3f}) fails (cost > 0) in "
                  f"{int((column > 0).sum())} of the {column.size} test environments. Shown: "
                  f"the first {fails} failure{'s' if fails != 1 else ''} and the first "
                  f"{len(picks) - fails} success{'es' if len(picks) - fails != 1 else ''} in seed "
                  "order (cost from the test matrix), each flown again from the stored policy "
                  "for the figure, whose title gives that rollout's own cost.", ""]
    drawn = set()
    for i, cost in picks:
        seed = first + i
        out = fig_dir / f"trajectory_seed{seed}.png"
        render(seed=seed, out=str(out), theta_path=str(theta_path),
               world_options=dict(world["options"]))
        drawn.add(out.name)
        kind = "" if cost is None else (f": failure (cost {cost:.4f})" if cost > 0
                                        else ": success (cost 0)")
        title = f"Test environment {seed}, policy {best}{kind}"
        lines += [f"### {title}", "", f"![{title}]({RunDir.FIGURES}/{out.name})", ""]
    for stale in fig_dir.glob("trajectory_seed*.png"):  # drawn by an earlier report
        if stale.name not in drawn:
            stale.unlink()
    return lines


def _world(cfg: RunConfig, last: Certificate) -> dict:
    """The world as the verified certificate records it (the config only for a certificate
    without provenance)."""
    return last.provenance.get("world") or {"name": cfg.world.name,
                                            "options": dict(cfg.world.options)}


def _returns_section(cfg: RunConfig, last: Certificate,
                     certs: dict[int, Certificate]) -> list[str]:
    """## In returns: a Gymnasium world's certificates turned back into returns (its users
    think in returns, not in costs); nothing for another world or cost rule."""
    world = _world(cfg, last)
    try:  # the bounds as the world derives them (return_bounds, or reward_bounds × horizon)
        span = return_range(world["name"], world["options"])
    except PacplanError as exc:
        return ["## In returns", "",
                f"Not shown: the world cannot be rebuilt here ({text(exc)}).", ""]
    if span is None:
        return []
    lo, hi = span
    where = code(world["options"].get("env_id", world["name"]))
    return ["## In returns", "",
            f"The cost of return R is (R_max − R)/(R_max − R_min) with [R_min, R_max] = "
            f"[{lo:g}, {hi:g}], so each certified cost gives a lower bound on the posterior's "
            f"expected return in {where}, with the same "
            "probability:", "",
            returns_table(certs, lo, hi), ""]


# ------------------------------------------------------------------------------ timings
def _timings_section(rd: RunDir, rollouts: int) -> list[str]:
    """## Wall time, from timings.json (for people: not hash-checked; unreadable is said).
    `rollouts` is the size of the run's matrices: when the history records computing fewer,
    the rest came from elsewhere (carried rows, or invocations from before the record), and
    the times do not cover them."""
    path = rd / RunDir.TIMINGS
    if not path.is_file():
        return []
    history, problem = read_timings(path)
    if problem is not None:
        return ["## Wall time", "", f"{RunDir.TIMINGS} is unreadable ({text(problem)}).", ""]
    body = timing_table(history, rollouts)
    counted = [e for e in history if isinstance(e, dict) and isinstance(e.get("rollouts"), dict)]
    done = int(sum(whole_count(timing_number(e, "rollouts", step), rollouts) for e in counted
                   for step in e["rollouts"]))
    if counted and done < rollouts:
        body += ["", f"The invocations recorded here computed {done:,} of the {rollouts:,} "
                 "rollouts in the run's matrices; the times above do not cover the other "
                 f"{rollouts - done:,}, computed by another run whose rows were carried in "
                 "(`scripts/carry_rows.py`) or by an invocation from before rollouts were "
                 "recorded."]
    return ["## Wall time", "", f"Seconds per step, from `{RunDir.TIMINGS}` (wall clock on the "
            "machines that ran it):", "", *body, ""]


# ------------------------------------------------------------------------------- report
def _header(cfg: RunConfig, last: Certificate) -> list[str]:
    """The report's opening: world, m, δ, solver and seeds, from the verified certificate."""
    world = _world(cfg, last)
    seeds = last.provenance.get("seeds") or {
        "prior": list(cfg.seeds.prior), "cert": [cfg.seeds.cert[0], cfg.seeds.cert[0] + last.n],
        "test": list(cfg.seeds.test)}
    return [
        f"# pacplan report: {text(cfg.name)}",
        "",
        f"World {code(world['name'])} "
        f"{text(json.dumps(world['options'])) if world['options'] else ''}; "
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
        *_screened(cfg, last),
    ]


def _screened(cfg: RunConfig, last: Certificate) -> list[str]:
    """A screened run says which policies its posteriors live on, and why that is valid."""
    if cfg.certificate.screen is None or last.columns is None:
        return []
    rows = cfg.certificate.screen.rows
    return [f"Screened (`certificate.screen`): all {last.m} policies on the first {rows:,} "
            f"certification environments, then only the {len(last.columns)} of least cost there "
            f"(policies {', '.join(str(i) for i in last.columns)}) on the rest and on the test "
            "set. Each posterior lives on those, its KL still taken against the uniform prior "
            f"over all {last.m}, so each bound holds as stated.", ""]


def write_report(run_dir: str | Path) -> Path:
    """Write report.md, report.html (the same, figures embedded) and figures/ for a run
    directory; returns report.md's path.

    Everything printed is checked first: each certificate is verified and each matrix read
    only once its sha256 matches manifest.json, so an edited file stops the report instead of
    appearing in it.
    """
    rd = RunDir(run_dir)
    if not rd.path.is_dir():
        raise PacplanError(f"{rd.path} is not a run directory; run `pacplan run` first")
    if folder_kind(rd.path) == "certify-policy directory":
        raise PacplanError(f"{rd.path} is a certify-policy folder, not a run directory: its "
                           "report is `pacplan report` "
                           "(pacplan.policy_certification.report.write_policy_report)")
    if not rd.certificates():  # before the lock: a refused report leaves no run.lock behind
        raise PacplanError(f"{rd.path} has no certificates yet; run `pacplan run` first")
    with rd.locked():  # no run may change what the report is checking and printing
        return _write_report(rd)


def _write_report(rd: RunDir) -> Path:
    certs = _certificates(rd)
    last = certs[max(certs)]
    cfg = load_config(rd / RunDir.CONFIG)
    manifest = Manifest(rd.path)
    cert_role = RunDir.cert_role(last.columns)
    cert = _checked_matrix(rd, manifest, _costs(cfg, cert_role))
    if cert is None:
        raise PacplanError(f"{rd.path} has no {_costs(cfg, cert_role)}; run `pacplan run` "
                           "first")
    test = _checked_matrix(rd, manifest, _costs(cfg, "test"))
    baselines = _baselines(rd, manifest, cfg, test)
    world = _world(cfg, last)
    paper = paper_figures(world["name"], certs, world["options"])
    figures = report_figures(rd / RunDir.FIGURES, certs, cert,
                             paper=paper_bounds(world["name"]) if paper else None)
    # (all of Table 1 is drawn once one N matches)
    prior = prior_section(rd, manifest, cfg)
    trajectories = _trajectories(rd, manifest, cfg, last, test)
    papers_prior = manifest.sha(RunDir.PRIOR) == MINITAUR_PRIOR_SHA256
    head = paper_column_head(world["name"], world["options"], papers_prior)
    lines = [*_header(cfg, last), table1(certs, baselines, paper, head), ""]
    lines += _returns_section(cfg, last, certs)
    if paper:
        lines += [paper_note(world["name"], world["options"], papers_prior), ""]
    lines += ["This report is also one page with its figures embedded: "
              f"`{RunDir.REPORT_HTML}`.", ""]
    if baselines and test is not None:
        lines += ["## Posterior against the baselines, environment by environment", "",
                  f"The posterior of N = {max(certs)} and each baseline on the same "
                  f"{len(test)} test environments.", "",
                  paired_comparison(last.matrix_p(), test, baselines), ""]
    for title, rel in figures:
        lines += [f"## {title}", "", f"![{title}]({rel})", ""]
    screen = cfg.certificate.screen
    flown = (cert.size if last.columns is None or screen is None  # screened: all m on its rows
             else screen.rows * last.m + (cert.shape[0] - screen.rows) * cert.shape[1])
    sizes = flown + sum(a.size for a in [*([] if test is None else [test]),
                                         *baselines.values()])
    lines += (crossval_section(rd, last) + prior + trajectories
              + _timings_section(rd, int(sizes)))
    text = "\n".join(lines)
    atomic_write_text(rd / RunDir.REPORT_HTML, markdown_to_html(text, rd.path,
                                                         f"pacplan report: {cfg.name}"))
    path = rd / RunDir.REPORT
    atomic_write_text(path, text)
    return path
