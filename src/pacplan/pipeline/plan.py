"""`pacplan plan-n`: what would a larger N certify, and what would its rollouts cost?

Environments are the lever on the bound's ln(2√N/δ)/N term, and they are the expensive part, so
a user should see the answer before paying for it. The prediction holds the column means c̄ of
the first K rows of the certification matrix fixed and re-optimizes the posterior for N (the
exact Gibbs search, `optimize_gibbs_means`); only sampling noise in c̄ separates it from the
certificate N environments would give. A screened run (`certificate.screen`) is predicted as
it certifies: the posterior on the policies the first K rows keep, their KL against all m, and
only those flown beyond its screening rows; K may reach past the screening rows into the
kept policies' own rows (`costs/cert-rest`, or the leading rows its chunk folder holds while
it computes), all of them by default. The cost comes from the run's own recorded time per
certification rollout on the machine that made it. A run still computing its matrix is
predicted from the leading rows its chunk folder holds whole.

timings.json is for people and may be damaged or edited. The certificate prediction never
depends on it, so an implausible entry does not stop plan-n: it is left out of the rate, and
`timing_notes` says which entry and why (a count that is not a whole number, or more than the
whole certification matrix; seconds not finite, negative, or 0 for rollouts computed). A rate
that still leaves float64 (1e308 seconds) is no rate, said the same way.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import load_config
from pacplan.errors import PacplanError
from pacplan.pacbayes import bounds
from pacplan.pacbayes.matrices import matrix_from_bytes
from pacplan.pacbayes.posterior import (
    column_means,
    optimize_gibbs_columns_means,
    optimize_gibbs_means,
)
from pacplan.pipeline.rows import kept_rows_beyond_screen, leading_cert_rows
from pacplan.pipeline.rundir import Manifest, RunDir, read_timings, timing_number, timing_raw
from pacplan.pipeline.stages import screen_columns
from pacplan.validation import check_unit_costs


@dataclass(frozen=True)
class NPlan:
    """The certificate predicted at `target_n` from the first `rows` rows, and its price."""

    run_dir: str
    rows: int
    target_n: int
    m: int
    delta: float
    bound: str
    emp_cost: float
    certified_at_rows: float
    predicted_certified: float
    predicted_certified_by: str
    predicted_kl: float
    rollouts: int  # target_n × m (screened: R × m + (target_n − R) × keep)
    rollouts_more: int  # beyond the rows this run already has
    seconds_per_rollout: float | None  # as measured when this run computed its matrix
    predicted_seconds: float | None  # for rollouts_more at that rate
    timing_notes: tuple[str, ...] = ()  # timings.json entries left out of the rate, and why
    screened: list[int] | None = None  # [rows, keep] of a screened run's certificate.screen

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan_n(run_dir: str | Path, target_n: int, rows: int | None = None) -> NPlan:
    """Predict the certificate at N = `target_n` from the first `rows` certification rows."""
    rd = RunDir(run_dir)
    if not rd.path.is_dir() or not (rd / RunDir.CONFIG).is_file():
        raise PacplanError(f"{rd.path}: not a run directory (no {RunDir.CONFIG})")
    cfg = load_config(rd / RunDir.CONFIG)
    rational = cfg.storage.cost_denominator is not None
    cert = _certification_matrix(rd, rational)
    have, screen = cert.shape[0], cfg.certificate.screen
    columns = (None if screen is None or have < screen.rows  # the run's kept policies
               else screen_columns(cert, screen.keep))
    beyond = None if columns is None else kept_rows_beyond_screen(rd, cfg, columns)
    if beyond is not None:
        beyond, _ = check_unit_costs(beyond, f"the rows past the screen in {rd.path}", False)
    available = have + (0 if beyond is None else beyond.shape[0])
    k = available if rows is None else rows
    if not 1 <= k <= available:
        raise PacplanError(f"--rows {k}: the certification matrix has {available} rows "
                           "(choose 1 to that)")
    if target_n < k:
        raise PacplanError(f"--target-n {target_n} is below --rows {k}: the prediction is for "
                           "a larger N than the rows it starts from")
    delta, bound = cfg.certificate.delta, cfg.certificate.bound
    m = cert.shape[1]
    if screen is None:
        cbar = column_means(cert[:k])
        here = optimize_gibbs_means(cbar, k, delta, bound)
        there = optimize_gibbs_means(cbar, target_n, delta, bound)
        total = int(target_n) * m
        wholes = {STEP: max(have, *(cfg.certificate.n or [1])) * m}  # one invocation's most
    else:  # a screened run: the policies the first K rows keep, and only those beyond its rows
        if beyond is None or k <= have:
            kept = cert[:k, screen_columns(cert[:k], screen.keep)]
        else:  # past the screening rows: the kept policies' own rows
            kept = np.vstack([cert[:, columns], beyond])[:k]
        cbar = column_means(kept)
        here = optimize_gibbs_columns_means(cbar, k, m, delta, bound)
        there = optimize_gibbs_columns_means(cbar, target_n, m, delta, bound)
        rows_all = min(int(target_n), screen.rows)
        total = rows_all * m + (int(target_n) - rows_all) * screen.keep
        wholes = {STEP: screen.rows * m,  # its costs/cert: the screening rows
                  REST_STEP: max(0, max(cfg.certificate.n or [1]) - screen.rows) * screen.keep}
    values = bounds.all_bounds(there.emp_cost, there.kl, target_n, delta)
    by = min(values, key=values.get)
    more = max(0, total - have * m - (0 if beyond is None else beyond.size))
    rate, notes = _seconds_per_rollout(rd, have * m, wholes)
    predicted = None if rate is None else rate * more
    if predicted is not None and not math.isfinite(predicted):
        notes.append(f"{more:,} rollouts at {rate:.3g} s each overflow float64: no time predicted")
        rate = predicted = None
    return NPlan(
        run_dir=str(rd.path), rows=k, target_n=int(target_n), m=m, delta=delta, bound=bound,
        emp_cost=here.emp_cost,
        certified_at_rows=min(bounds.all_bounds(here.emp_cost, here.kl, k, delta).values()),
        predicted_certified=values[by], predicted_certified_by=by, predicted_kl=there.kl,
        rollouts=total, rollouts_more=more, seconds_per_rollout=rate,
        predicted_seconds=predicted, timing_notes=tuple(notes),
        screened=None if screen is None else [screen.rows, screen.keep])


def _certification_matrix(rd: RunDir, rational: bool) -> np.ndarray:
    """costs/cert of the run, read once and used only if its sha256 is the manifest's; while
    the run still computes it, the leading rows its chunk folder holds whole."""
    name = RunDir.costs("cert", rational)
    data = Manifest(rd.path).read_finished(name)  # read once, checked against its sha256
    if data is not None:
        values = matrix_from_bytes(data, f"{name} in {rd.path}")
    elif rd.chunks("cert").is_dir():
        values = leading_cert_rows(rd)
    else:
        raise PacplanError(f"{rd.path} has no finished certification matrix ({name}) and no "
                           "finished rows of one; run `pacplan run` first")
    values, _ = check_unit_costs(values, f"{name} in {rd.path}", False)
    if values.ndim != 2:
        raise PacplanError(f"{name} in {rd.path} is not a matrix (shape {values.shape})")
    return values


STEP = "cert costs"
REST_STEP = "cert-rest costs"  # a screened run's kept policies past its screening rows


def _seconds_per_rollout(rd: RunDir, rollouts: int, wholes: dict[str, int]
                         ) -> tuple[float | None, list[str]]:
    """Seconds per certification rollout on the machine that computed them, and the timings
    entries left out (with why). `wholes` gives each certification step timed ('cert costs',
    and a screened run's 'cert-rest costs') the most rollouts one invocation can compute.

    Invocations that recorded how many rollouts they computed (chunks kept from an earlier
    invocation, or carried in from a stage run, are not counted) give the rate exactly. Only
    when none did (a run older than that record) is every invocation's 'cert costs' time spread
    over all of the matrix's `rollouts`, which overstates the rate if chunks came from
    elsewhere. An entry is used only if plausible in every step: seconds a finite number ≥ 0,
    rollouts a whole number from 0 to the step's whole, and seconds > 0 where rollouts > 0."""
    history, _ = read_timings(rd / RunDir.TIMINGS)
    counted_s = counted_n = legacy_s = 0.0
    notes: list[str] = []
    for number, entry in enumerate(history, start=1):
        problem = next(filter(None, (_implausible(entry, step, whole)
                                     for step, whole in wholes.items())), None)
        if problem is not None:
            notes.append(f"{RunDir.TIMINGS} entry {number} left out of the rate: {problem}")
            continue
        for step in wholes:
            value = timing_number(entry, "seconds", step)
            if value is None:  # no such step in this invocation
                continue
            done = timing_number(entry, "rollouts", step)
            if done is not None:
                counted_s, counted_n = counted_s + value, counted_n + done
            elif step == STEP:  # from before rollouts were recorded (no screened run was)
                legacy_s += value
    if counted_n > 0:
        rate = counted_s / counted_n
    else:
        rate = legacy_s / rollouts if legacy_s > 0 and rollouts > 0 else None
    if rate is not None and not (math.isfinite(rate) and rate > 0 and math.isfinite(1 / rate)):
        notes.append(f"the recorded {STEP} times give {rate:.3g} s per rollout, outside float64's "
                     "range: no rate")
        rate = None
    return rate, notes


def _implausible(entry: Any, step: str, whole: int) -> str | None:
    """Why a timings entry's numbers for `step` cannot be this machine's, or None."""
    seconds, rollouts = timing_raw(entry, "seconds", step), timing_raw(entry, "rollouts", step)
    if seconds is None:
        return None  # not recorded: nothing to use, nothing wrong
    if timing_number(entry, "seconds", step) is None:
        return f"{step} took {seconds!r} s, not a finite number ≥ 0"
    if rollouts is None:
        return None
    done = timing_number(entry, "rollouts", step)
    if done is None or not done.is_integer():
        return f"{step} computed {rollouts!r} rollouts, not a whole number ≥ 0"
    if done > whole:
        return (f"{step} computed {rollouts!r} rollouts, more than the whole certification "
                f"matrix ({whole:,})")
    if done > 0 and seconds == 0:
        return f"{step} computed {int(done):,} rollouts in 0 s"
    return None


