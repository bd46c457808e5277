"""`pacplan plan-n RUN_DIR --target-n N`: the certificate a larger N would give, and its price,
before paying for it (`pacplan.pipeline.plan`)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from pacplan.cli.output import console, print_json
from pacplan.pipeline.execution.progress import duration
from pacplan.pipeline.plan import plan_n


def plan_n_cmd(
    run_dir: Path = typer.Argument(..., metavar="RUN_DIR", help="A run directory with a "
                                   "certification matrix."),
    target_n: int = typer.Option(..., "--target-n", metavar="N", help="The N to predict."),
    rows: int | None = typer.Option(None, "--rows", metavar="K", help="Use the first K rows "
                                    "(default: all)."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object instead of text."),
) -> None:
    """Predict the certificate at N from the first K certification rows (their column means
    held fixed, the posterior re-optimized for N) and what its rollouts would cost here."""
    plan = plan_n(run_dir, target_n, rows)
    if as_json:
        print_json(plan.as_dict())
        return
    console.print(f"{escape(str(run_dir))}: from the first {plan.rows:,} rows "
                  f"(Ĉ {100 * plan.emp_cost:.2f} %, certified {100 * plan.certified_at_rows:.2f} %"
                  f" at N = {plan.rows:,}), N = {plan.target_n:,} would certify about "
                  f"[bold]{100 * plan.predicted_certified:.2f} %[/] "
                  f"({plan.predicted_certified_by}, KL {plan.predicted_kl:.2f}, "
                  f"δ = {plan.delta:g})",
                  soft_wrap=True)
    if plan.screened is None:
        cost = f"{plan.rollouts:,} rollouts in all ({plan.target_n:,} × m = {plan.m})"
    else:
        rows, keep = plan.screened
        first = min(plan.target_n, rows)
        cost = (f"{plan.rollouts:,} rollouts in all, screened ({first:,} × m = {plan.m}, then "
                f"{plan.target_n - first:,} × {keep} kept)")
    if plan.rollouts_more:
        cost += f", {plan.rollouts_more:,} more than this run has"
        if plan.predicted_seconds is not None and plan.seconds_per_rollout is not None:
            cost += (f": about {duration(plan.predicted_seconds)} at this run's "
                     f"{_rate(1 / plan.seconds_per_rollout)} rollouts/s")
    console.print(cost, soft_wrap=True)
    for note in plan.timing_notes:  # a damaged timings.json: said, not trusted
        console.print(f"[dim]{escape(note)}[/]", soft_wrap=True)


def _rate(per_second: float) -> str:
    """'4,860' or '1.76': three figures at least, so a slow world's rate is not rounded to 2."""
    return f"{per_second:,.0f}" if per_second >= 100 else f"{per_second:.3g}"
