"""The report's "certificate in another engine" section: crossval/<engine>.json files, written by
benchmarks/quadruped_result_crossval.py --save, replay the certified posterior in another
physics engine. They are for people and not hash-checked, so every field is checked for type
and range before it is quoted, and a file made for another certificate is named as stale.
"""

from __future__ import annotations

import json
import math
import shlex
from typing import Any

from pacplan.errors import PacplanError
from pacplan.io.files import read_file_bytes
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.rundir import SHA256_PATTERN, RunDir
from pacplan.report.markdown import code, text
from pacplan.report.tables import pct
from pacplan.validation import SAFE_NAME, is_int


def _is_number(v: Any, lo: float = -math.inf, hi: float = math.inf) -> bool:
    return (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            and lo <= v <= hi)


def _is_sha256(v: Any) -> bool:
    return isinstance(v, str) and SHA256_PATTERN.fullmatch(v) is not None


def _is_pair(v: Any, item: Any) -> bool:
    """[a, b] with a ≤ b, each passing `item`."""
    return (isinstance(v, list) and len(v) == 2 and all(item(x) for x in v)
            and v[0] <= v[1])


_CROSSVAL_FIELDS: dict[str, tuple[str, Any]] = {
    # field: (what it must be, its check); engines are also put into a shell command
    "engine": ("an engine name (letters, digits, '_', '.', '-')",
               lambda v: isinstance(v, str) and SAFE_NAME.fullmatch(v) is not None),
    "run_engine": ("an engine name (letters, digits, '_', '.', '-')",
                   lambda v: isinstance(v, str) and SAFE_NAME.fullmatch(v) is not None),
    "terrains": ("a seed range [start, stop) of two integers, 0 ≤ start < stop",
                 lambda v: _is_pair(v, lambda x: is_int(x) and x >= 0) and v[0] < v[1]),
    "replayed_mean_cost": ("a number in [0, 1]", lambda v: _is_number(v, 0.0, 1.0)),
    "stored_same_draws_mean_cost": ("a number in [0, 1]", lambda v: _is_number(v, 0.0, 1.0)),
    "paired_diff": ("a number in [-1, 1]", lambda v: _is_number(v, -1.0, 1.0)),
    "paired_diff_ci99": ("an interval [lower, upper] of two finite numbers",
                         lambda v: _is_pair(v, _is_number)),
    "run_test_ci99": ("an interval [lower, upper] of two numbers in [0, 1]",
                      lambda v: _is_pair(v, lambda x: _is_number(x, 0.0, 1.0))),
    "within_test_ci": ("true or false", lambda v: isinstance(v, bool)),
    "test_matrix_sha256": ("a sha256 (64 lowercase hex digits)", _is_sha256),
    "certificate_n": ("an integer ≥ 1 (or absent, in a file from before it was recorded)",
                      lambda v: v is None or (is_int(v) and v >= 1)),
    "posterior_sha256": ("a sha256 (or absent, in a file from before it was recorded)",
                         lambda v: v is None or _is_sha256(v)),
}
_CROSSVAL_OPTIONAL = {"certificate_n", "posterior_sha256"}


def _crossval_problem(r: Any) -> str | None:
    """Why a crossval record may not be quoted (None: every field the report shows or compares
    has its type and range): it is not hash-checked, so nothing in it is printed unchecked."""
    if not isinstance(r, dict):
        return f"it holds a JSON {type(r).__name__}, not an object"
    for field, (rule, ok) in _CROSSVAL_FIELDS.items():
        if field not in r and field not in _CROSSVAL_OPTIONAL:
            return f"it has no `{field}`"
        if not ok(r.get(field)):
            return f"its `{field}` is not {rule}"
    if not r["paired_diff_ci99"][0] <= r["paired_diff"] <= r["paired_diff_ci99"][1]:
        return "its `paired_diff` lies outside its `paired_diff_ci99`"
    return None


def crossval_section(rd: RunDir, last: Certificate) -> list[str]:
    """## The certificate in another engine: crossval/<engine>.json, written by
    benchmarks/quadruped_result_crossval.py --save. A replay for people (not part of what
    `pacplan verify` checks); one made from another posterior or test matrix (a certificate
    at another N, or recomputed rows) is named stale, not quoted. Every field quoted is checked
    first (`_crossval_problem`): a file that fails is named with the reason and skipped, so a
    stray or damaged file neither stops the report nor gets into it."""
    folder = rd / RunDir.CROSSVAL
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        return []
    lines = ["## The certificate in another engine", ""]
    own = (last.test_matrix.sha256 if last.test_matrix is not None else None)
    for path in files:
        rel = code(f"{RunDir.CROSSVAL}/{path.name}")
        try:
            # read_file_bytes: a FIFO among the crossval files is named, not waited on
            r = json.loads(read_file_bytes(path, path.name).decode("utf-8"))
        except (PacplanError, ValueError, RecursionError) as exc:
            lines += [f"{rel} is unreadable ({text(type(exc).__name__)}: {text(exc)}).", ""]
            continue
        problem = _crossval_problem(r)
        if problem is not None:
            lines += [f"{rel} is not quoted: {problem} (a crossval file is not hash-checked, "
                      "so every field the report shows is checked first).", ""]
            continue
        engine, run_engine, seeds = r["engine"], r["run_engine"], r["terrains"]
        diff, diff_ci, test_ci = r["paired_diff"], r["paired_diff_ci99"], r["run_test_ci99"]
        stale = _crossval_stale(r, last, own)
        if stale is not None:
            again = (f"python benchmarks/quadruped_result_crossval.py {shlex.quote(rd.path.name)}"
                     f" --engine {engine} --save")
            lines += [f"{rel} was made from {stale}: rerun {code(again)}.", ""]
            continue
        k = seeds[1] - seeds[0]
        lines += [
            f"From {rel} (`python benchmarks/quadruped_result_crossval.py RUN --engine {engine}"
            " --save`; a replay for people, not part of what `pacplan verify` checks). The "
            f"posterior of N = {last.n} replayed in **{engine}** on the first {k} test "
            f"environments (seeds {seeds[0]}–{seeds[1] - 1}), one draw from the posterior "
            f"per environment: mean cost **{pct(r['replayed_mean_cost'])}**; the same draws in "
            f"this run's engine ({run_engine}), read from the stored test matrix: "
            f"{pct(r['stored_same_draws_mean_cost'])}; paired "
            f"difference {100 * diff:+.2f} points (99 % interval [{100 * diff_ci[0]:+.2f}, "
            f"{100 * diff_ci[1]:+.2f}]). The run's test cost has the 99 % interval "
            f"[{pct(test_ci[0])}, {pct(test_ci[1])}]: the {engine} mean lies "
            f"{'inside' if r['within_test_ci'] else 'OUTSIDE'} it.", ""]
    return lines


def _crossval_stale(r: dict[str, Any], last: Certificate, own_test: str | None) -> str | None:
    """What in a (checked) crossval file is not this certificate's (None: it was made for it).
    A file from before posteriors were recorded is judged by its certificate's N."""
    sha = r["test_matrix_sha256"]
    if sha != own_test:
        return (f"another test matrix (sha256 {sha[:12]}…, this certificate's is "
                f"{str(own_test)[:12]}…)")
    n = r.get("certificate_n")
    if n != last.n:
        return (f"the posterior of N = {n}" if n is not None else "a posterior of unrecorded N"
                ) + f", not this certificate's N = {last.n}"
    posterior, own_posterior = r.get("posterior_sha256"), last.posterior_sha256()
    if posterior is not None and posterior != own_posterior:
        return (f"another posterior (sha256 {posterior[:12]}…, this certificate's is "
                f"{own_posterior[:12]}…)")
    return None
