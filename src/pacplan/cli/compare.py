"""`pacplan compare RUN_A RUN_B`: do two run directories agree under the reproducibility
contract? Exit 0 when they do, 1 naming the first artifact (and entry or field) that differs,
2 for bad input (`cli.main` prints a `PacplanError` as one line)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from pacplan.cli.output import console, err_console, print_json
from pacplan.pipeline.compare import TOLERANCE, Agreement, compare_runs


def compare_cmd(
    run_a: Path = typer.Argument(..., metavar="RUN_A", help="A run directory."),
    run_b: Path = typer.Argument(..., metavar="RUN_B", help="Another run directory."),
    as_json: bool = typer.Option(False, "--json", help="One JSON object instead of text."),
) -> None:
    """Check that two runs agree whatever executor or machine made them: prior, policies and
    cost matrices byte for byte, certificates and the ES log to 1e-9 (docs/reproducibility.md).
    Exit 1 names the first difference."""
    result = compare_runs(run_a, run_b)
    agree = isinstance(result, Agreement)
    if as_json:
        if agree:
            print_json({"agree": True, "identical": result.identical,
                        "within_tolerance": result.within_tolerance, "tolerance": TOLERANCE})
        else:
            print_json({"agree": False, "artifact": result.artifact, "detail": result.detail})
    elif agree:
        console.print(f"[green]agree[/] {escape(str(run_a))} and {escape(str(run_b))}: "
                      f"{len(result.identical)} artifacts byte-identical "
                      f"({', '.join(result.identical)}); {len(result.within_tolerance)} equal by "
                      f"value, numbers to {TOLERANCE:g} relative "
                      f"({', '.join(result.within_tolerance)})",
                      soft_wrap=True)
    else:
        err_console.print(f"[red]differ[/] {escape(str(result))}", soft_wrap=True)
    if not agree:
        raise typer.Exit(1)
