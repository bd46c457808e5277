"""`pacplan …` command line (Typer + Rich). Thin: parses, calls the library, prints.

Every user-fixable problem (a `PacplanError`, an `OSError` such as a read-only folder or a full
disk, a usage error) is printed as one line with exit 2, never a traceback. A config argument is
a file or the name of a shipped preset (`pacplan presets`); `--version` and shell completion
(`--install-completion`) are on the top-level command.
"""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from pacplan import __version__
from pacplan.choices import BOUND_CHOICES, EXECUTORS, SOLVERS
from pacplan.cli_certify import certify_policy_cmd
from pacplan.cli_compare import compare_cmd
from pacplan.cli_data import data_app
from pacplan.cli_monitor import monitor_cmd
from pacplan.cli_output import (
    certificate_table,
    click_exception_types,
    console,
    err_console,
    error_line,
    fail,
    interrupted_line,
    number_text,
    one_paragraph_summaries,
    os_error_line,
    print_json,
    show_flags_as_flags,
    shown,
    sigterm_as_ctrl_c,
    stdout_to_stderr,
    usage_line,
)
from pacplan.cli_plan import plan_n_cmd
from pacplan.errors import PacplanError
from pacplan.outputs import refuse_overwriting
from pacplan.pacbayes import bounds
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.presets import list_presets, preset_path, resolve_config, resolve_prior, shipped_priors
from pacplan.run.provenance import verify_certificate
from pacplan.validation import INT64_MAX, check_choice, check_delta, check_whole_number, count

app = typer.Typer(
    name="pacplan",
    help="Train vision-based planners with PAC-Bayes certificates.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)
app.add_typer(data_app, name="data", help="Fetch published data (the paper's cost matrices).")
app.command("monitor")(monitor_cmd)
app.command("compare")(compare_cmd)
app.command("plan-n")(plan_n_cmd)
app.command("certify-policy")(certify_policy_cmd)


def _choices(names: tuple[str, ...]) -> str:
    """How a choice option shows its values in --help: [a|b|c]."""
    return "[" + "|".join(names) + "]"


def _completer(names: tuple[str, ...]):
    """Shell completion of one of `names` (the value is still checked by `check_choice`)."""
    def complete(incomplete: str) -> list[str]:
        return [n for n in names if n.startswith(incomplete)]
    return complete


def _complete_preset(incomplete: str) -> list[str]:
    """Preset names for `pacplan run <TAB>`; the shell adds file names when none match."""
    return [p.name for p in list_presets() if p.name.startswith(incomplete)]


def _complete_prior(incomplete: str) -> list[str]:
    return [name for name in shipped_priors() if name.startswith(incomplete)]


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"pacplan {__version__}")
        raise typer.Exit()


@app.callback()
def _main_options(
    version: bool = typer.Option(False, "--version", help="Print pacplan's version and exit.",
                                 is_eager=True, callback=_show_version),
) -> None:
    """Train vision-based planners with PAC-Bayes certificates."""


BoundOpt = typer.Option(
    "best", "--bound", metavar=_choices(BOUND_CHOICES), autocompletion=_completer(BOUND_CHOICES),
    help="Bound to minimize (best: the smallest of the three)."
)
ExecutorOpt = typer.Option(
    None, "--executor", metavar=_choices(EXECUTORS), autocompletion=_completer(EXECUTORS),
    help="Where rollouts run (default: the config's); never changes a result."
)
ConfigArg = typer.Argument(..., metavar="CONFIG", autocompletion=_complete_preset,
                           help="A run config (YAML file) or a preset name, e.g. uav-quick "
                           "(`pacplan presets` lists them); a file of that name wins.")
DeltaOpt = typer.Option(0.01, "--delta", help="Confidence parameter δ in (0, 1).")


@app.command("certify-matrix")
def certify_matrix(
    costs: Path = typer.Argument(..., help="Certification cost matrix (.npy, N × m, in [0, 1])."),
    test: Path | None = typer.Option(None, "--test", help="Held-out test cost matrix (.npy)."),
    rows: int | None = typer.Option(None, "--rows", help="Use only the first N rows of COSTS."),
    delta: float = DeltaOpt,
    bound: str = BoundOpt,
    solver: str = typer.Option("gibbs", "--solver", metavar=_choices(SOLVERS),
                               autocompletion=_completer(SOLVERS),
                               help="gibbs: exact and fast; rep: the paper's convex program."),
    clip: bool = typer.Option(False, "--clip", help="Clip costs outside [0, 1] (recorded)."),
    out: Path | None = typer.Option(None, "--out", help="Write the certificate JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Optimize a posterior over the m policies of a cost matrix and certify it."""
    check_delta(delta)
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


@app.command("bound")
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


@app.command("verify")
def verify_cmd(
    file: Path = typer.Argument(..., help="certificate.json, or a planner directory "
                                          "(pacplan export), to check."),
) -> None:
    """Recompute a certificate from the matrices it references; fail on any mismatch. A
    planner directory: every file's sha256, its certificate, and its policies and
    probabilities against the certificate."""
    from pacplan.export import is_planner_dir, verify_planner

    if is_planner_dir(file):
        c = verify_planner(file)
        console.print(f"[green]OK[/] planner {shown(file)}: every file matches manifest.json; its "
                      f"certificate verifies (certified cost ≤ {100 * c.certified:.2f} %, "
                      f"δ = {c.delta:g}, N = {c.n}); support, probabilities and weights are "
                      "the certified ones")
        return
    c = verify_certificate(file)
    console.print(f"[green]OK[/] {shown(file)}: certified cost ≤ {100 * c.certified:.2f} % "
                  f"({c.certified_by}, δ = {c.delta:g}, N = {c.n}, m = {c.m}); inputs match "
                  "their sha256 and every number recomputes")


@app.command("export")
def export_cmd(
    run_dir: Path = typer.Argument(..., help="Run directory whose certificate verifies."),
    out: Path = typer.Option(..., "--out", help="New planner directory to write."),
    n: int | None = typer.Option(None, "--n", help="Export certificates/N<n>.json instead "
                                 "of the main certificate.json."),
) -> None:
    """Export the certified planner (posterior support, ONNX net, weights, fixed parts,
    certificate) for `pacplan.runtime`; refuses a certificate that does not verify."""
    from pacplan.export import export_planner, verify_planner

    refuse_overwriting(out, "--out", {"RUN_DIR": run_dir})  # not into a planner or run dir
    export_planner(run_dir, out, n)
    c = verify_planner(out)
    console.print(f"[green]Exported[/] {shown(out)}: certified cost ≤ {100 * c.certified:.2f} % "
                  f"(δ = {c.delta:g}, N = {c.n}); draw one policy per episode "
                  "(docs/deploy.md)")


@app.command("run")
def run_cmd(
    config: str = ConfigArg,
    out: Path | None = typer.Option(None, "--out", help="Run directory (default runs/<name>)."),
    prior: str | None = typer.Option(
        None, "--prior", metavar="FILE", autocompletion=_complete_prior,
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
    from pacplan.run.fresh import discard_if_refused
    from pacplan.run.pipeline import check_worlds, run
    from pacplan.run.report import write_report
    from pacplan.run.rundir import RunDir

    cfg = load_config(resolve_config(config))
    prior_file = resolve_prior(prior) if prior is not None else None
    check_worlds(cfg)  # before the run directory is made
    _apply_executor_options(cfg, executor, workers, address)
    run_dir = out or Path("runs") / cfg.name
    refuse_overwriting(run_dir, "--out", {"--prior": prior_file}, resumes=True)
    # one lock for the run and its report; `kill` stops it as Ctrl-C does
    with sigterm_as_ctrl_c(), discard_if_refused(run_dir), RunDir(run_dir).locked():
        result = run(cfg, run_dir, prior_file=prior_file, progress=not quiet,
                     log=lambda msg: console.print(f"[dim]{msg}[/]"))
        report = write_report(run_dir)
    console.print(certificate_table(result.certificates[max(result.certificates)]))
    console.print(f"run directory {shown(run_dir)}; report {shown(report)} and "
                  f"{RunDir.REPORT_HTML}", soft_wrap=True)


@app.command("report")
def report_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory made by `pacplan run`."),
) -> None:
    """Write report.md, report.html and figures/ for a run directory (Table 1 form, one row
    per N)."""
    from pacplan.run.report import write_report
    from pacplan.run.rundir import RunDir

    report = write_report(run_dir)
    console.print(f"wrote {shown(report)}, {shown(report.parent / RunDir.REPORT_HTML)} (one "
                  f"page, figures embedded) and {shown(report.parent / RunDir.FIGURES)}/",
                  soft_wrap=True)


def _apply_executor_options(cfg, executor: str | None, workers: int | None,
                            address: str | None) -> None:
    if executor is not None:
        cfg.executor.kind = check_choice("executor", executor, EXECUTORS)
    if workers is not None:
        if workers < 1:
            raise PacplanError("--workers must be >= 1")
        cfg.executor.workers = workers
    if address is not None:  # a cluster address only means something to Ray
        cfg.executor.address = address
        cfg.executor.kind = "ray"


@app.command()
def render(
    world: str = typer.Argument(..., help="World to draw (a registered world with a renderer, "
                                "e.g. uav or quadruped)."),
    seed: int = typer.Option(..., "--seed", help="Environment seed."),
    theta: str | None = typer.Option(
        None, "--theta", help="Policy weights (.npy or .safetensors)."
    ),
    out: str = typer.Option("render.png", "--out", help="PNG file to write."),
    option: list[str] = typer.Option([], "--option", "-o", metavar="KEY=VALUE",
                                     help="A world option (repeatable), e.g. --option "
                                     "physics=mujoco."),
) -> None:
    """Draw one environment with the flown (or walked) trajectory and the depth image."""
    from pacplan.worlds.base import check_world_options, world_renderer
    from pacplan.worlds.check_report import parse_world_options

    check_whole_number(seed, "--seed", minimum=0, maximum=INT64_MAX)
    # a PNG over the weights loses them; over a device or FIFO replaces it
    refuse_overwriting(out, "--out", {"--theta": theta}, file=True)
    options = parse_world_options(option)
    render_figure = world_renderer(world)
    if render_figure is None:
        raise PacplanError(f"world {world!r} has no renderer")
    check_world_options(world, options)  # a misspelt option is named before anything runs
    path = render_figure(seed=seed, out=out, theta_path=theta, world_options=options or None)
    console.print(f"wrote {shown(path)}")


_CHECK_STYLES = {"passed": "green", "failed": "bold red", "warning": "yellow", "skipped": "dim"}


@app.command("check-world")
def check_world_cmd(
    world: str = typer.Argument(..., help="A registered world, e.g. toy, uav or quadruped."),
    option: list[str] = typer.Option([], "--option", "-o", metavar="KEY=VALUE",
                                     help="A world option (repeatable), e.g. --option dim=4."),
    seeds: int = typer.Option(8, "--seeds", help="Try environment seeds 0 … SEEDS−1."),
    policies: int = typer.Option(4, "--policies", help="Try zeros and POLICIES−1 small random "
                                 "policies."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as one JSON object."),
) -> None:
    """Check that a world keeps the promises a certificate rests on (exit 2 if one fails)."""
    from pacplan.worlds.check import check_world
    from pacplan.worlds.check_report import parse_world_options

    n_seeds = check_whole_number(seeds, "--seeds", minimum=1)
    with stdout_to_stderr(as_json):  # a world that prints must not corrupt the JSON
        report = check_world(world, parse_world_options(option), seeds=range(n_seeds),
                             n_policies=check_whole_number(policies, "--policies", minimum=1))
    if as_json:
        print_json(report.to_dict())
    else:
        table = Table(title=f"check-world {escape(world)} (d = {report.policy_dim}, "
                      f"{count(len(report.seeds), 'seed')} × {count(report.n_policies, 'policy')})")
        for column in ("check", "result", "detail"):
            table.add_column(column)
        for r in report.results:
            style = _CHECK_STYLES.get(r.status, "")
            table.add_row(r.name, f"[{style}]{r.status}[/]", escape(r.detail))
        console.print(table)
    if not report.ok:
        fail(report.summary())


@app.command("train-prior")
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
    from pacplan.run.fresh import discard_if_refused
    from pacplan.run.pipeline import check_worlds
    from pacplan.run.rundir import RunDir
    from pacplan.run.training import train_prior

    cfg = load_config(resolve_config(config))
    check_worlds(cfg)  # the whole config is checked, baselines included
    refuse_overwriting(out, "--out", resumes=True)  # not into a planner or another run
    _apply_executor_options(cfg, executor, workers, address)
    with discard_if_refused(out):
        state = train_prior(cfg, out, progress=not quiet,
                            log=lambda msg: console.print(f"[dim]{escape(msg)}[/]"))
    console.print(
        f"ES: {state.iteration} iterations, best training cost {state.best_cost:.4f} "
        f"(iteration {state.best_iteration}), mean σ {float(state.sigma.mean()):.4f}",
        soft_wrap=True,
    )
    rd = RunDir(out)
    console.print(f"wrote {shown(rd / RunDir.PRIOR)} and {shown(rd / RunDir.TRAINING_CURVE)}",
                  soft_wrap=True)


@app.command("presets")
def presets_cmd(
    name: str | None = typer.Argument(None, metavar="[NAME]", autocompletion=_complete_preset,
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
        table.add_column("name", no_wrap=True)
        table.add_column("description")
        for p in presets:
            if p.kind == kind:
                table.add_row(p.name, escape(p.description))
        console.print(table)
    console.print(f"Shipped priors (pacplan run … --prior NAME): {', '.join(shipped_priors())}")
    console.print(f"Files: {escape(str(presets[0].path.parent))}", soft_wrap=True)


def main() -> None:
    """Console-script entry point: one-line errors, exit code 2, no traceback."""
    usage_errors, exits, aborts = click_exception_types()
    command = typer.main.get_command(app)
    show_flags_as_flags(command)
    one_paragraph_summaries(command)
    try:
        rc = command(standalone_mode=False, prog_name="pacplan")
    except PacplanError as exc:
        fail(error_line(exc, sys.argv))
    except OSError as exc:  # a read-only folder, a full disk, --out naming a file
        fail(os_error_line(exc))
    except KeyboardInterrupt:
        err_console.print(interrupted_line(sys.argv), highlight=False, markup=False)
        sys.exit(130)
    except usage_errors as exc:
        fail(usage_line(exc))
    except exits as exc:
        sys.exit(exc.exit_code)
    except aborts:
        sys.exit(1)
    if isinstance(rc, int) and rc:  # Typer returns 130 for Ctrl-C in non-standalone mode
        if rc == 130:
            err_console.print(interrupted_line(sys.argv), highlight=False, markup=False)
        sys.exit(rc)


if __name__ == "__main__":
    main()
