"""The report's tables: Table 1 in the paper's form (with the paper's own figures where the run
reproduces its setting), the posterior against each baseline on the same test environments, and
the wall time of each step. Pure functions of checked numbers: no files; a name in a cell is
written with `pacplan.report.markdown.text`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.pacbayes.certificate import confidence_interval
from pacplan.pacbayes.posterior import mixture_costs
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.execution.progress import duration
from pacplan.pipeline.rundir import timing_number
from pacplan.report.markdown import text
from pacplan.worlds.base import world_paper_story
from pacplan.worlds.story import PaperStory

PAPER_M = 50
PAPER_DELTA = 0.01
"""The paper's Table 1 is at m = 50 and δ = 0.01; its rows per N are each world's
(`pacplan.worlds.story.PaperStory`, named by the world's registry entry)."""


PAPER_HEAD = "paper (its own world and prior)"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f} %"


VACUOUS = "≥ 100 % (vacuous)"
"""How a bound of 1 or more is shown: a cost in [0, 1] is below it anyway, so it says nothing
(109.17 % printed as a figure read as if it were one)."""


def bound_pct(x: float | None) -> str:
    """A bound in percent, or `VACUOUS` when it is 1 or more."""
    return VACUOUS if x is not None and x >= 1.0 else pct(x)


def reproduces_paper_setting(world: str, c: Certificate,
                             options: dict[str, Any] | None = None) -> bool:
    """True when certificate `c` is in a setting of the paper's Table 1: a world the paper has
    rows for, in its setting (the quadruped on the paper's robot, say), m = 50 policies,
    δ = 0.01 and one of the paper's N (its prior, and for the UAV its world, still differ)."""
    story = world_paper_story(world)
    return (story is not None and story.in_setting(options) and c.m == PAPER_M
            and c.n in story.rows
            and math.isclose(c.delta, PAPER_DELTA, rel_tol=1e-12, abs_tol=0.0))


def paper_figures(world: str, certs: dict[int, Certificate],
                  options: dict[str, Any] | None = None) -> dict[int, str]:
    """The paper's Table 1 entry for each N whose certificate reproduces a paper setting."""
    out = {}
    for n, c in certs.items():
        if reproduces_paper_setting(world, c, options):
            bound, value, test = _story(world).rows[n]
            text = f"{pct(value)} ({bound})"
            if test is not None:
                text += f"; test {pct(test)}"
            out[n] = text
    return out


def paper_bounds(world: str) -> dict[int, float]:
    """N -> the bound the paper's Table 1 reports in `world` (for the bounds-against-N plot)."""
    story = world_paper_story(world)
    return {} if story is None else {n: value for n, (_, value, _) in story.rows.items()}


def paper_note(world: str, options: dict[str, Any] | None = None,
               papers_prior: bool = False) -> str:
    """The note under Table 1 saying how far the paper's figures are this run's setting;
    `papers_prior`: the run certified the paper's published prior."""
    return str(_story(world).note(options, papers_prior))


def paper_column_head(world: str, options: dict[str, Any] | None = None,
                      papers_prior: bool = False) -> str:
    """The paper column's heading (the world's story words how its setting differs; a world
    the paper has no rows for shows no column, and its heading is the plain one)."""
    story = world_paper_story(world)
    if story is None:
        return PAPER_HEAD
    return str(story.column_head(options, papers_prior))


def _story(world: str) -> PaperStory:
    story = world_paper_story(world)
    if story is None:
        raise PacplanError(f"the paper's Table 1 has no rows for world {world!r}")
    return story


def table1(certs: dict[int, Certificate], baselines: dict[str, np.ndarray],
           paper: dict[int, str] | None = None,
           paper_head: str = PAPER_HEAD) -> str:
    """Markdown table in the form of the paper's Table 1, one row per N, then baseline rows.

    `paper` (N -> text) adds a column `paper_head` filled on those rows only (`paper_figures`).
    """
    paper = paper or {}
    extra_head, extra_rule = (f" {paper_head} |", "---:|") if paper else ("", "")
    lines = [
        "| N | Ĉ (train) | KL | McAllester | quadratic | kl-inverse | **certified** "
        f"| test cost [99 % CI] | gap |{extra_head}",
        f"|---:|---:|---:|---:|---:|---:|---:|---:|---:|{extra_rule}",
    ]
    for n, c in certs.items():
        ci = f" [{pct(c.test_ci[0])}, {pct(c.test_ci[1])}]" if c.test_ci else ""
        gap = "—" if c.test_cost is None else f"{100 * (c.certified - c.test_cost):.2f} pts"
        extra = f" {paper.get(n, '')} |" if paper else ""
        lines.append(f"| {n} | {pct(c.emp_cost)} | {c.kl:.3f} | {bound_pct(c.mcallester)} | "
                     f"{bound_pct(c.quadratic)} | {bound_pct(c.klinv)} | "
                     f"**{bound_pct(c.certified)}** | "
                     f"{pct(c.test_cost)}{ci} | {gap} |{extra}")
    test_n = max((c.test_n or 0 for c in certs.values()), default=0)
    for name, costs in baselines.items():
        lo, hi = confidence_interval(costs[:, 0])
        extra = "  |" if paper else ""
        first = f" (first {len(costs)} test environments)" if len(costs) < test_n else ""
        lines.append(f"| baseline: {text(name)}{first} | — | — | — | — | — | — | "
                     f"{pct(float(costs.mean()))} [{pct(lo)}, {pct(hi)}] | — |{extra}")
    return "\n".join(lines)


TIE_TOLERANCE = 1e-12
"""Posterior and baseline costs (in [0, 1]) closer than this count as tied in the paired table."""


def paired_difference(a: np.ndarray, b: np.ndarray, resamples: int = 10_000,
                      rng: np.random.Generator | None = None) -> dict[str, Any]:
    """a − b on the same environments: the mean, its 99 % percentile bootstrap interval over
    environments (`rng`, by default seeded 0, so a redrawn report is identical) and how many
    environments a is lower, higher or tied on. Pairing removes the environment-to-environment
    spread that makes two separate test-cost intervals overlap. Descriptive, not a
    certificate."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    # a tie within rounding is a tie: p·c of equal costs differs from c by an ulp or two
    # depending on the summation order, which must not move environments between columns
    d[np.abs(d) <= TIE_TOLERANCE] = 0.0
    rng = np.random.default_rng(0) if rng is None else rng
    means = d[rng.integers(0, d.size, (resamples, d.size))].mean(axis=1)
    lo, hi = np.percentile(means, [0.5, 99.5])
    return {"mean": float(d.mean()), "ci99": [float(lo), float(hi)],
            "lower": int((d < 0).sum()), "higher": int((d > 0).sum()),
            "tied": int((d == 0).sum())}


def paired_comparison(p: np.ndarray, test: np.ndarray, baselines: dict[str, np.ndarray],
                      resamples: int = 10_000) -> str:
    """Markdown table: the posterior against each baseline on the same test environments (a
    baseline flown on the first ones only: those), per environment d = (posterior's expected
    cost) − (baseline's cost) (`paired_difference`)."""
    posterior = mixture_costs(test, p)
    rng = np.random.default_rng(0)  # one stream for all the rows, as the shipped reports drew
    lines = [
        "| baseline | its test cost | posterior's | posterior − baseline [99 % paired bootstrap] "
        "| posterior better / worse / tied |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, costs in baselines.items():
        own = posterior[: len(costs)]  # a baseline flown on the first test environments only
        d = paired_difference(own, costs[:, 0], resamples, rng)
        lo, hi = d["ci99"]
        first = f" (first {len(costs)})" if len(costs) < len(posterior) else ""
        lines.append(f"| {text(name)}{first} | {pct(float(costs.mean()))} "
                     f"| {pct(float(own.mean()))} "
                     f"| {100 * d['mean']:+.2f} pts [{100 * lo:+.2f}, {100 * hi:+.2f}] "
                     f"| {d['lower']} / {d['higher']} / {d['tied']} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- the prior
def _seconds(value: float) -> str:
    return f"{value:,.1f}" if value >= 10 else f"{value:.2f}"


def whole_count(count: float | None, most: int | None) -> int:
    """A recorded rollout count when it can be one (a whole number, at most the run's `most`
    rollouts), else 0: a damaged timings.json must not claim a billion rollouts."""
    ok = count is not None and count.is_integer() and (most is None or count <= most)
    return int(count) if ok and count is not None else 0


def _cpu_per_step(runs: list[dict[str, Any]], most: int | None
                  ) -> dict[str, tuple[int, int, float]]:
    """step → (rollouts recorded, rollouts whose CPU time is recorded, those CPU seconds),
    summed over the invocations; only cost steps record rollouts."""
    out: dict[str, tuple[int, int, float]] = {}
    for entry in runs:
        counts = entry.get("rollouts")
        if not isinstance(counts, dict):
            continue
        for step in counts:
            n = whole_count(timing_number(entry, "rollouts", step), most)
            cpu = timing_number(entry, "cpu_seconds", step)
            done, timed, seconds = out.get(str(step), (0, 0, 0.0))
            if cpu is not None and n > 0:
                timed, seconds = timed + n, seconds + cpu
            out[str(step)] = (done + n, timed, seconds)
    return out


def timing_table(history: list[Any], most_rollouts: int | None = None) -> list[str]:
    """Markdown: one row per step with its wall time summed over every invocation of
    `pacplan run` recorded in timings.json, its share, a total, and how many invocations;
    where invocations recorded them, each cost step's rollouts and their CPU seconds each
    (a count above `most_rollouts`, the run's matrices, is damaged and not taken)."""
    totals: dict[str, float] = {}
    runs = []
    for entry in history:
        secs = entry.get("seconds") if isinstance(entry, dict) else None
        if not isinstance(secs, dict):
            continue
        runs.append(entry)
        for step, value in secs.items():
            if (isinstance(value, (int, float)) and not isinstance(value, bool)
                    and math.isfinite(value)):
                totals[str(step)] = totals.get(str(step), 0.0) + float(value)
    if not runs:
        return ["No step times are recorded in timings.json."]
    total = sum(totals.values())
    per_step = _cpu_per_step(runs, most_rollouts)
    lines = ["| step | wall time (s) | share |", "|---|---:|---:|"]
    if per_step:
        lines = ["| step | wall time (s) | share | rollouts computed | CPU s a rollout |",
                 "|---|---:|---:|---:|---:|"]
    for step, value in totals.items():
        share = f"{100 * value / total:.1f} %" if total > 0 else "—"
        row = f"| {text(step)} | {_seconds(value)} | {share} |"
        if per_step:
            done, timed, cpu = per_step.get(step, (0, 0, 0.0))
            rate = f"{cpu / timed:.3g}" if timed else "—"
            row += f" {done:,} | {rate} |" if step in per_step else " — | — |"
        lines.append(row)
    total_row = f"| **total** | **{_seconds(total)}** ({duration(total)}) | 100 % |"
    if per_step:
        done = sum(d for d, _, _ in per_step.values())
        total_row += f" {done:,} | |"
    lines.append(total_row)
    stamps = [text(r.get("finished")) for r in runs if r.get("finished")]  # unhashed: text
    k = len(runs)
    when = ""
    if stamps:
        when = (f", finished {stamps[0]}" if k == 1 else
                f"; the first finished {stamps[0]}, the last {stamps[-1]}")
    lines += ["", (f"Summed over {k} invocation{'s' if k != 1 else ''} of `pacplan run` "
                   f"({k - 1} resume{'s' if k != 2 else ''}{when})" if k > 1 else
                   f"From 1 invocation of `pacplan run` (no resumes{when})")
              + ". A resumed step counts only the work it had left; an invocation stopped "
              "by Ctrl-C records its time up to then, one killed by a signal records none."]
    if any(timed for _, timed, _ in per_step.values()):
        lines[-1] += (" CPU s a rollout: the CPU time of the processes that computed a "
                      "step's rollouts (all their threads, on whichever machine ran them), "
                      "per rollout, over the invocations that recorded it.")
    return lines


def returns_table(certs: dict[int, Certificate], r_min: float, r_max: float) -> str:
    """Markdown table: each certificate in a Gymnasium env's own units. The cost is
    (R_max − R)/(R_max − R_min), linear in R, so a bound C on the expected cost is the bound
    R_max − C·(R_max − R_min) on the expected return (holding on the same event), and the test
    cost and its interval map the same way, ends swapped."""
    span = r_max - r_min

    def ret(c: float) -> str:
        return f"{r_max - c * span:.6g}"

    lines = ["| N | **certified expected return ≥** | test mean return [99 % CI] |",
             "|---:|---:|---:|"]
    for n, c in certs.items():
        test = "—" if c.test_cost is None else ret(c.test_cost)
        if c.test_ci:
            test += f" [{ret(c.test_ci[1])}, {ret(c.test_ci[0])}]"
        lines.append(f"| {n} | **{ret(c.certified)}** | {test} |")
    return "\n".join(lines)
