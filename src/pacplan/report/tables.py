"""The report's tables: Table 1 in the paper's form (with the paper's own figures where the run
reproduces its setting), the posterior against each baseline on the same test environments, and
the wall time of each step. Pure functions of checked numbers: no files; a name in a cell is
written with `pacplan.report.markdown.text`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from pacplan.pacbayes.certificate import confidence_interval
from pacplan.pacbayes.posterior import mixture_costs
from pacplan.pacbayes.record import Certificate
from pacplan.report.markdown import text
from pacplan.run.progress import duration

# The paper's Table 1 (Veer & Majumdar, CoRL 2020), δ = 0.01, m = 50, per world: for each N the
# bound it reports and, where it states one, the test cost of that N's posterior. UAV: the figures
# its published matrices give (docs/design.md, "Paper reference data"; test cost at N = 4000 only).
# Quadruped: its C_QPAC and true cost as printed (PyBullet's Minitaur Derpy, 5000 test terrains).
PAPER_M = 50
PAPER_DELTA = 0.01
PAPER_TABLE1: dict[str, dict[int, tuple[str, float, float | None]]] = {
    "uav": {
        1000: ("McAllester", 0.2602, None),
        2000: ("quadratic", 0.2299, None),
        4000: ("quadratic", 0.2155, 0.1843),
    },
    "quadruped": {
        1000: ("quadratic", 0.2387, 0.1831),
        2000: ("quadratic", 0.2193, 0.1829),
        4000: ("quadratic", 0.2073, 0.1781),
    },
}
# A world option the paper's setting needs (absent: the world's default, which is the paper's).
_PAPER_OPTIONS: dict[str, dict[str, Any]] = {"quadruped": {"robot": "derpy"}}


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
    """True when certificate `c` is in a setting of the paper's Table 1: a world of the paper
    (the quadruped on its robot, the Derpy), m = 50 policies, δ = 0.01 and one of the paper's N
    (its prior, and for the UAV its world, still differ)."""
    table = PAPER_TABLE1.get(world, {})
    needed = _PAPER_OPTIONS.get(world, {})
    if any((options or {}).get(key, value) != value for key, value in needed.items()):
        return False
    return (c.m == PAPER_M and c.n in table
            and math.isclose(c.delta, PAPER_DELTA, rel_tol=1e-12, abs_tol=0.0))


def paper_figures(world: str, certs: dict[int, Certificate],
                  options: dict[str, Any] | None = None) -> dict[int, str]:
    """The paper's Table 1 entry for each N whose certificate reproduces a paper setting."""
    out = {}
    for n, c in certs.items():
        if reproduces_paper_setting(world, c, options):
            bound, value, test = PAPER_TABLE1[world][n]
            text = f"{pct(value)} ({bound})"
            if test is not None:
                text += f"; test {pct(test)}"
            out[n] = text
    return out


def paper_bounds(world: str) -> dict[int, float]:
    """N -> the bound the paper's Table 1 reports in `world` (for the bounds-against-N plot)."""
    return {n: value for n, (_, value, _) in PAPER_TABLE1.get(world, {}).items()}


PAPER_NOTES: dict[str, str] = {
    "uav": (
        "*paper*: what the paper's Table 1 reports for the same N, m = 50 and δ = 0.01 (the bound "
        "it used, and the test cost of its N = 4000 posterior). It was obtained on the paper's own "
        "UAV world and with its own prior, so it places this run's numbers in context; it is not "
        "a like-for-like comparison. The paper's world is the easier one: its own published "
        "prior, flown in this world, costs 23.17 % (mean policy) and 22.79 % (its 50 draws, as "
        "its code drew them) on 2,000 environments, against 14.4 % for the mean policy in the "
        "paper's world (`python benchmarks/uav_paper_prior.py`). What differs between the two "
        "worlds (collision body, safe start, camera far plane and tunnel, primitives, the net's "
        "input scale and output order, the Depth Filter's cells), why, and what each does: "
        "docs/worlds.md, \"Beside the paper's UAV world\"."),
    "quadruped": (
        "*paper*: what the paper's Table 1 reports for the same N, m = 50 and δ = 0.01 (its "
        "quadratic bound C_QPAC and the true cost of each posterior, on 5000 test terrains). It "
        "walked the same robot (pybullet_envs' Minitaur Derpy) in PyBullet with its own prior "
        "(ES on 10 terrains × 5 pairs per iteration) and its code's gait clock, which ran at "
        "twice the simulated time; so it places this run's numbers in context and is not a "
        "like-for-like comparison. The world's differences from the paper's code, and the "
        "MuJoCo twin against PyBullet: docs/worlds.md."),
}
# The quadruped's `variant: paper-code` is the paper's experiment as its code ran it: there the
# paper's figures differ from the run's by the prior (and the terrains drawn), not the world.
_PAPER_CODE_NOTE = (
    "*paper*: what the paper's Table 1 reports for the same N, m = 50 and δ = 0.01 (its "
    "quadratic bound C_QPAC and the true cost of each posterior, on 5000 test terrains). This "
    "run walks the paper's experiment as its code ran it (`variant: paper-code`: 0.25 s "
    "primitives with the gait clock at twice simulated time, 5 s rollouts, overlapping box "
    "tents at half the friction, the cost read at the start of the last primitive) on the same "
    "robot{engine}; {differs}")
_PAPER_CODE_DIFFERS = (
    "what still differs is the prior (the paper's: ES on 10 terrains × 5 pairs per iteration) "
    "and the terrains drawn. To certify the paper's own prior on this run's terrains: `pacplan "
    "data paper`, `pacplan data minitaur-prior paper-minitaur.safetensors`, then the same "
    "preset with `--prior paper-minitaur.safetensors` (docs/results.md).")
_PAPER_CODE_DIFFERS_PAPERS_PRIOR = (
    "the prior is the paper's own, as published (`pacplan data minitaur-prior`), so what still "
    "differs is the terrains drawn and the 50 policies drawn from that prior (drawn by "
    "`policies.seed`, not as the paper's code drew them).")
_PAPER_CODE_ENGINES = {
    "bullet": " in the paper's engine, PyBullet",
    "mujoco": (" in MuJoCo, a twin that was not calibrated against PyBullet in this variant "
               "(docs/worlds.md), so its numbers are not the paper's engine's"),
}


def _paper_code(world: str, options: dict[str, Any] | None) -> str | None:
    """The engine of a quadruped run in the paper-code variant; None for any other run."""
    opts = options or {}
    if world != "quadruped" or opts.get("variant") != "paper-code":
        return None
    return str(opts.get("physics") or "mujoco")  # the variant's default engine


def paper_note(world: str, options: dict[str, Any] | None = None,
               papers_prior: bool = False) -> str:
    """The note under Table 1 saying how far the paper's figures are this run's setting;
    `papers_prior`: the run certified the paper's published prior."""
    engine = _paper_code(world, options)
    if engine is None:
        return PAPER_NOTES[world]
    differs = _PAPER_CODE_DIFFERS_PAPERS_PRIOR if papers_prior else _PAPER_CODE_DIFFERS
    return _PAPER_CODE_NOTE.format(engine=_PAPER_CODE_ENGINES.get(engine, f" in {engine}"),
                                   differs=differs)


def paper_column_head(world: str, options: dict[str, Any] | None = None,
                      papers_prior: bool = False) -> str:
    """The paper column's heading: its world differs from the run's unless the run is in the
    paper-code variant, where only its prior does (or, with the paper's prior, its draws)."""
    if _paper_code(world, options) is None:
        return "paper (its own world and prior)"
    if papers_prior:
        return "paper (its code's experiment and prior, its own terrains)"
    return "paper (its code's experiment, its own prior)"


def table1(certs: dict[int, Certificate], baselines: dict[str, np.ndarray],
           paper: dict[int, str] | None = None,
           paper_head: str = "paper (its own world and prior)") -> str:
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


def timing_table(history: list[Any]) -> list[str]:
    """Markdown: one row per step with its wall time summed over every invocation of
    `pacplan run` recorded in timings.json, its share, a total, and how many invocations."""
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
    lines = ["| step | wall time (s) | share |", "|---|---:|---:|"]
    for step, value in totals.items():
        share = f"{100 * value / total:.1f} %" if total > 0 else "—"
        lines.append(f"| {text(step)} | {_seconds(value)} | {share} |")
    lines.append(f"| **total** | **{_seconds(total)}** ({duration(total)}) | 100 % |")
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
