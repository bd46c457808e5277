"""`pacplan run`, `report`, `train-prior` and `presets`: running a config (a file or a shipped
preset), writing a run's report, training a prior alone, and listing what ships."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from pacplan.cli.options import (
    ConfigArg,
    ExecutorOpt,
    complete_preset,
    complete_prior,
)
from pacplan.cli.output import certificate_table, console, shown, sigterm_as_ctrl_c
from pacplan.presets import list_presets, preset_path, resolve_config, resolve_prior, shipped_priors


def run_cmd(
    config: str = ConfigArg,
    out: Path | None = typer.Option(None, "--out", help="Run directory (default runs/<name>)."),
    prior: str | None = typer.Option(
        None, "--prior", metavar="FILE", autocompletion=complete_prior,
        help="Use this trained prior (.safetensors, or a shipped one by name: "
        f"{', '.join(shipped_priors())}) instead of the config's or training one."),
    executor: str | None = ExecutorOpt,
    workers: int | None = typer.Option(None, "--workers", help="Worker processes."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address "
                                       "(implies --executor ray)."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bars."),
) -> None:
    """Run every step (prior, policies, cost matrices, certificates, report); resumable."""
    from pacplan.config import load_config
    from pacplan.pipeline.fresh import discard_if_refused
    from pacplan.pipeline.pipeline import run
    from pacplan.pipeline.rundir import RunDir
    from pacplan.pipeline.start import CLI, start_run
    from pacplan.report.document import write_report

    config_file = resolve_config(config)
    cfg = load_config(config_file)
    prior_file = resolve_prior(prior) if prior is not None else None
    started = start_run(cfg, out, CLI, prior_file=prior_file, config_file=config_file,
                        executor=executor, workers=workers, address=address)
    run_dir = started.run_dir
    if started.adopted:
        console.print(f"[dim]{escape(started.adopted)}[/]", soft_wrap=True)
    # one lock for the run and its report; `kill` stops it as Ctrl-C does
    with sigterm_as_ctrl_c(), discard_if_refused(run_dir), RunDir(run_dir).locked():
        result = run(cfg, run_dir, prior_file=prior_file, progress=not quiet,
                     log=lambda msg: console.print(f"[dim]{msg}[/]"))
        report = write_report(run_dir)
    console.print(certificate_table(result.certificates[max(result.certificates)]))
    console.print(f"run directory {shown(run_dir)}; report {shown(report)} and "
                  f"{RunDir.REPORT_HTML}", soft_wrap=True)


def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory made by `pacplan run`, or a "
                                   "certify-policy folder."),
) -> None:
    """Write report.md, report.html and figures/ for a run directory (Table 1 form, one row
    per N); for a certify-policy folder, report.md and report.html."""
    from pacplan.pipeline.rundir import RunDir
    from pacplan.policy_certification.store import is_policy_dir
    from pacplan.report.document import write_report

    if is_policy_dir(run_dir):
        from pacplan.policy_certification.report import REPORT_HTML, write_policy_report

        report = write_policy_report(run_dir)
        console.print(f"wrote {shown(report)} and {shown(report.parent / REPORT_HTML)}",
                      soft_wrap=True)
        return
    report = write_report(run_dir)
    console.print(f"wrote {shown(report)}, {shown(report.parent / RunDir.REPORT_HTML)} (one "
                  f"page, figures embedded) and {shown(report.parent / RunDir.FIGURES)}/",
                  soft_wrap=True)


def train_prior_cmd(
    config: str = ConfigArg,
    out: str = typer.Option(..., "--out", help="Run directory; an existing one is resumed."),
    executor: str | None = ExecutorOpt,
    workers: int | None = typer.Option(None, "--workers", help="Worker processes / Ray CPUs."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
) -> None:
    """Train the PAC-Bayes prior with Evolution Strategies (resumes a killed run exactly)."""
    from pacplan.config import load_config
    from pacplan.pipeline.fresh import discard_if_refused
    from pacplan.pipeline.prior.training import train_prior
    from pacplan.pipeline.rundir import RunDir
    from pacplan.pipeline.start import CLI, start_run

    config_file = resolve_config(config)
    cfg = load_config(config_file)
    start_run(cfg, out, CLI, config_file=config_file, executor=executor, workers=workers,
              address=address, adopt_prior=False)  # the whole config, baselines included
    with discard_if_refused(out):
        state = train_prior(cfg, out, progress=not quiet,
                            log=lambda msg: console.print(f"[dim]{escape(msg)}[/]"))
    scaled = (f" (the prior file's: × {scale:g})"
              if (scale := cfg.es.prior_sigma_scale) != 1.0 else "")
    if state.iteration == 0:  # es.iterations 0: the start is the prior
        console.print(f"ES: no iterations (es.iterations 0): the prior is its start, mean σ "
                      f"{float(state.sigma.mean()):.4f}{scaled}", soft_wrap=True)
    else:
        console.print(
            f"ES: {state.iteration} iterations, best training cost {state.best_cost:.4f} "
            f"(iteration {state.best_iteration}), mean σ {float(state.sigma.mean()):.4f}"
            + scaled, soft_wrap=True)
    from pacplan.pipeline.prior import distill, distill_opening

    rd = RunDir(out)
    figures = [f for f in (rd / RunDir.TRAINING_CURVE, rd / distill.DIR / distill_opening.FIGURE)
               if f.is_file()]
    console.print(f"wrote {' and '.join(shown(f) for f in [rd / RunDir.PRIOR, *figures])}",
                  soft_wrap=True)


def presets_cmd(
    name: str | None = typer.Argument(None, metavar="[NAME]", autocompletion=complete_preset,
                                      help="Print this preset's file path instead (to read or "
                                      "copy it)."),
) -> None:
    """List the shipped presets (`pacplan run NAME`) and priors (`--prior NAME`)."""
    if name is not None:
        typer.echo(str(preset_path(name)))
        return
    presets = list_presets()
    for kind, title in (("run", "Presets: pacplan run NAME"),
                        ("prior", "How the shipped priors were made: pacplan train-prior NAME")):
        table = Table(title=title, title_justify="left")
        widest = max(len(p.name) for p in presets if p.kind == kind)
        table.add_column("name", no_wrap=True, min_width=widest)  # whole, on any terminal
        table.add_column("description")
        for p in presets:
            if p.kind == kind:
                table.add_row(p.name, escape(p.description))
        console.print(table)
    console.print(f"Shipped priors (pacplan run … --prior NAME): {', '.join(shipped_priors())}")
    console.print(f"Files: {escape(str(presets[0].path.parent))}", soft_wrap=True)
