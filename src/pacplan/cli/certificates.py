"""`pacplan certify-matrix`, `bound`, `verify` and `export`: certificates from a cost matrix,
the bounds alone, checking a certificate or planner, and exporting a certified planner."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from pacplan.choices import BOUND_CHOICES, SOLVERS
from pacplan.cli.options import BoundOpt, DeltaOpt, choices, completer
from pacplan.cli.output import certificate_table, console, fail, number_text, print_json, shown
from pacplan.io.outputs import refuse_overwriting
from pacplan.pacbayes import bounds
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.validation import check_choice, check_delta, check_whole_number, count


def certify_matrix(
    costs: Path = typer.Argument(..., help="Certification cost matrix (.npy, N × m, in [0, 1])."),
    test: Path | None = typer.Option(None, "--test", help="Held-out test cost matrix (.npy)."),
    rows: int | None = typer.Option(None, "--rows", help="Use only the first N rows of COSTS."),
    delta: float = DeltaOpt,
    bound: str = BoundOpt,
    solver: str = typer.Option("gibbs", "--solver", metavar=choices(SOLVERS),
                               autocompletion=completer(SOLVERS),
                               help="gibbs: exact and fast; rep: the paper's convex program."),
    clip: bool = typer.Option(False, "--clip", help="Clip costs outside [0, 1] (recorded)."),
    out: Path | None = typer.Option(None, "--out", help="Write the certificate JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Optimize a posterior over the m policies of a cost matrix and certify it."""
    check_delta(delta, "--delta")
    check_choice("bound", bound, BOUND_CHOICES)
    check_choice("solver", solver, SOLVERS)
    if out is not None:  # never write the certificate over the matrix it is made from
        refuse_overwriting(out, "--out", {"COSTS": costs, "--test": test}, file=True)
    flags = ("--rows", "--clip")  # errors advise the flags, not the Python arguments
    cert = load_cost_matrix(costs, rows=rows, clip=clip, name=str(costs), options=flags)
    test_m = (load_cost_matrix(test, clip=clip, name=str(test), options=flags)
              if test is not None else None)
    c = build_certificate(cert, delta, bound=bound, solver=solver, test=test_m)
    if out is not None:
        c.save(out)
    if as_json:
        print_json(c.to_dict())
    else:
        console.print(certificate_table(c))
        if out is not None:
            console.print(f"certificate written to {shown(out)}")


def bound_cmd(
    emp: float = typer.Option(..., "--emp", help="Empirical cost Ĉ in [0, 1]."),
    kl: float = typer.Option(..., "--kl", help="KL(p‖p0) ≥ 0."),
    n: str = typer.Option(..., "-n", "--n", metavar="N",
                          help="Number of certification environments N (e.g. 4000 or 4e3)."),
    delta: float = DeltaOpt,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Print the McAllester, quadratic and kl-inverse bounds for given Ĉ, KL, N and δ."""
    n_envs = check_whole_number(n, "N (-n)")
    check_delta(delta, "--delta")
    values = bounds.all_bounds(emp, kl, n_envs, delta)
    if as_json:
        print_json({**values, "certified": min(values.values()), "emp_cost": emp, "kl": kl,
                     "n": n_envs, "delta": delta})
        return
    table = Table(title=f"PAC-Bayes bounds (Ĉ = {emp:g}, KL = {kl:g}, N = {n_envs}, "
                  f"δ = {delta:g})")
    table.add_column("bound")
    table.add_column("value", justify="right")
    for name, value in values.items():
        table.add_row(name, number_text(value))
    console.print(table)


def verify_cmd(
    file: Path = typer.Argument(..., help="certificate.json, or a planner directory "
                                          "(pacplan export), to check."),
    strict: bool = typer.Option(False, "--strict", help="Fail (exit 1) when anything the "
                                "certificate rests on could not be checked."),
) -> None:
    """Recompute a certificate from the matrices it references; fail on any mismatch. A
    planner directory: every file's sha256, its certificate, and its policies and
    probabilities against the certificate. A certify-policy certificate: also every file it
    records (policies, user code, statistics) re-hashed; what cannot be checked is listed."""
    from pacplan.export.verify_any import PLANNER, POLICY_FOLDER, verify_any

    verified = verify_any(file)
    c, unchecked = verified.certificate, verified.unchecked
    if verified.kind == PLANNER:
        console.print(f"[green]OK[/] planner {shown(file)}: every file matches manifest.json; its "
                      f"certificate verifies (certified cost ≤ {100 * c.certified:.2f} %, "
                      f"δ = {c.delta:g}, N = {c.n}); support, probabilities and weights are "
                      "the certified ones")
        return
    in_folder = verified.kind == POLICY_FOLDER
    what = ("; what it certifies (environment, policies, cost, seeds) matches "
            "certify-policy.json" if in_folder else "")
    files = ("" if not in_folder else "the files it records match their sha256, "
             if not unchecked else "every file it records that was found matches its sha256, ")
    summary = (f"{shown(file)}: certified cost ≤ {100 * c.certified:.2f} % ({c.certified_by}, "
               f"δ = {c.delta:g}, N = {c.n}, m = {c.m}); inputs match their sha256, {files}"
               f"and every number recomputes{what}")
    if not unchecked:
        console.print(f"[green]OK[/] {summary}")
        return
    if strict:
        fail(f"{shown(file)}: {count(len(unchecked), 'item')} could not be checked "
             f"(--strict): {unchecked[0]}", code=1)
    console.print(f"[yellow]OK for what could be checked[/] {summary}; "
                  f"[yellow]{count(len(unchecked), 'item')} could not be checked[/] "
                  "(--strict fails on this):")
    for line in unchecked:
        console.print(f"  [yellow]•[/] {escape(line)}", soft_wrap=True)


def export_cmd(
    run_dir: Path = typer.Argument(..., help="Run directory or certify-policy folder whose "
                                   "certificate verifies."),
    out: Path = typer.Option(..., "--out", help="New planner directory to write."),
    n: int | None = typer.Option(None, "--n", help="Export the certificate for this N "
                                 "(certificates/) instead of the main certificate.json."),
) -> None:
    """Export the certified planner (posterior support, ONNX net, weights, fixed parts,
    certificate) for `pacplan.runtime`; refuses a certificate that does not verify. RUN_DIR
    may be a certify-policy folder: its certified policies as ONNX (docs/certify-policy.md)."""
    from pacplan.export import export_planner, verify_planner
    from pacplan.export.folder import refuse_nonempty, whole_or_nothing

    # refused before anything is written: not an input, nor in or above one, nor a used folder
    refuse_overwriting(out, "--out", {"RUN_DIR": run_dir})
    refuse_nonempty(out)
    with whole_or_nothing(out):  # a planner that does not verify is not left behind
        export_planner(run_dir, out, n)
        c = verify_planner(out)
    console.print(f"[green]Exported[/] {shown(out)}: certified cost ≤ {100 * c.certified:.2f} % "
                  f"(δ = {c.delta:g}, N = {c.n}); draw one policy per episode "
                  "(docs/deploy.md)")
