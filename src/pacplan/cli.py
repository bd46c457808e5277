"""`pacplan …` command line (Typer + Rich). Thin: parses, calls the library, prints.

Every user-fixable problem surfaces as `PacplanError` and is printed as one line with exit 2.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from pacplan.errors import PacplanError

app = typer.Typer(
    name="pacplan",
    help="Train vision-based planners with PAC-Bayes certificates.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
err_console = Console(stderr=True)


@app.command()
def render(
    world: str = typer.Argument(..., help="World to draw: uav or quadruped."),
    seed: int = typer.Option(..., "--seed", help="Environment seed."),
    theta: str | None = typer.Option(None, "--theta", help="Policy weights (.npy or .safetensors)."),
    out: str = typer.Option("render.png", "--out", help="PNG file to write."),
) -> None:
    """Draw one environment with the flown (or walked) trajectory and the depth image."""
    import importlib

    try:
        module = importlib.import_module(f"pacplan.worlds.{world}.render")
    except ModuleNotFoundError as exc:
        raise PacplanError(f"no renderer for world {world!r}") from exc
    path = module.render_figure(seed=seed, out=out, theta_path=theta)
    console.print(f"wrote {path}")


def main() -> None:
    """Console-script entry point: one-line errors, exit code 2, no traceback."""
    try:
        app(standalone_mode=False)
    except PacplanError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except FileNotFoundError as exc:
        err_console.print(f"[bold red]error:[/] file not found: {exc.filename}", highlight=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted; finished work is kept in the run directory")
        sys.exit(130)
    except Exception as exc:  # click usage errors
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(2)
        if isinstance(exc, click.exceptions.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(1)
        raise


if __name__ == "__main__":
    main()
