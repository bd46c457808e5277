"""`pacplan render` and `check-world`: drawing one environment of a world, and checking that a
world keeps the promises a certificate rests on."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from pacplan.cli.output import console, fail, print_json, shown, stdout_to_stderr
from pacplan.errors import PacplanError
from pacplan.io.outputs import refuse_overwriting
from pacplan.validation import INT64_MAX, check_whole_number, count


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
    with stdout_to_stderr(as_json) as stdout:  # a world that prints must not corrupt JSON
        report = check_world(world, parse_world_options(option), seeds=range(n_seeds),
                             n_policies=check_whole_number(policies, "--policies", minimum=1))
        if as_json:
            print_json(report.to_dict(), stdout)
    if not as_json:
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
