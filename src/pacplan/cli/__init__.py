"""`pacplan …` command line (Typer + Rich). Thin: parses, calls the library, prints. This module
holds the app and its entry point; each command group lives in its own module beside it.

Every user-fixable problem (a `PacplanError`, an `OSError` such as a read-only folder or a full
disk, a usage error) is printed as one line with exit 2, never a traceback. A config argument is
a file or the name of a shipped preset (`pacplan presets`); `--version` and shell completion
(`--install-completion`) are on the top-level command.
"""

from __future__ import annotations

import sys
from typing import Any

import typer

from pacplan import __version__
from pacplan.cli.certificates import bound_cmd, certify_matrix, export_cmd, verify_cmd
from pacplan.cli.certify_policy import certify_policy_cmd
from pacplan.cli.compare import compare_cmd
from pacplan.cli.data import data_app
from pacplan.cli.monitor import monitor_cmd
from pacplan.cli.output import (
    click_exception_types,
    err_console,
    error_line,
    fail,
    interrupted_line,
    one_paragraph_summaries,
    os_error_line,
    show_flags_as_flags,
    usage_line,
)
from pacplan.cli.plan import plan_n_cmd
from pacplan.cli.run import presets_cmd, report_cmd, run_cmd, train_prior_cmd
from pacplan.cli.worlds import check_world_cmd, render
from pacplan.errors import PacplanError, one_line_warnings
from pacplan.io.user_code import find_modules_in_working_folder, working_folder_modules

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

# the order of these lines is the order `pacplan --help` lists the commands in
for _name, _command in (("certify-matrix", certify_matrix), ("bound", bound_cmd),
                        ("verify", verify_cmd), ("export", export_cmd), ("run", run_cmd),
                        ("report", report_cmd), ("render", render),
                        ("check-world", check_world_cmd), ("train-prior", train_prior_cmd),
                        ("presets", presets_cmd)):
    app.command(_name)(_command)


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



def main() -> None:
    """Console-script entry point: one-line errors, exit code 2, no traceback.

    One rule for every command that loads user code (a policy, cost or env module named
    `module:…`): the working folder is searched after the installed libraries, never a folder
    that merely holds someone's planner or run, and what was imported from it is said."""
    usage_errors, exits, aborts = click_exception_types()
    command = typer.main.get_command(app)
    show_flags_as_flags(command)
    one_paragraph_summaries(command)
    one_line_warnings()
    before = set(sys.modules)  # only what the command imports is looked at afterwards
    find_modules_in_working_folder()
    try:
        rc = _run(command, usage_errors, exits, aborts)
    finally:
        ran = working_folder_modules([n for n in list(sys.modules) if n not in before])
        if ran:
            err_console.print(f"user code imported from the working folder: {', '.join(ran)}",
                              style="dim", highlight=False, markup=False, soft_wrap=True)
    if isinstance(rc, int) and rc:  # Typer returns 130 for Ctrl-C in non-standalone mode
        if rc == 130:
            err_console.print(interrupted_line(sys.argv), highlight=False, markup=False)
        sys.exit(rc)


def _run(command: Any, usage_errors: Any, exits: Any, aborts: Any) -> Any:
    """The command's return code; each kind of failure printed as one line and exited."""
    try:
        return command(standalone_mode=False, prog_name="pacplan")
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


if __name__ == "__main__":
    main()
