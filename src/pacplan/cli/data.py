"""`pacplan data …`: fetch the data sets pacplan's examples and tests use.

A sub-app so that `cli.py` only registers it (`app.add_typer(data_app, name="data")`); errors
are `PacplanError`s, which `cli.main` prints as one line with exit 2.
"""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator
from pathlib import Path

import typer

from pacplan.cli.output import sigterm_raises
from pacplan.errors import PacplanError
from pacplan.io import paperdata
from pacplan.io.outputs import refuse_overwriting

data_app = typer.Typer(
    help="Download data sets (the paper's published UAV and Minitaur cost matrices and priors).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def certify_commands(directory: Path) -> list[str]:
    """The `certify-matrix` lines to run next on the fetched matrices (UAV, then quadruped),
    quoted for a shell. The quadruped's costs were not clipped by the paper's code (48 cells
    exceed 1), so its line clips them."""
    lines = []
    for robot, out, extra in (("quadrotor", "paper-uav", ""), ("minitaur", "paper-minitaur",
                                                                " --clip")):
        cert = shlex.quote(str(directory / f"C_{robot}.npy"))
        test = shlex.quote(str(directory / f"C_{robot}_emp_test.npy"))
        lines.append(f"pacplan certify-matrix {cert} --test {test}{extra} "
                     f"--out runs/{out}/certificate.json")
    return lines


class Terminated(SystemExit):
    """SIGTERM, raised as an exception so the download's cleanup runs (no .part is left)."""


@contextlib.contextmanager
def _terminate_cleanly() -> Iterator[None]:
    """While downloading, SIGTERM unwinds like Ctrl-C: the partial file is removed."""
    try:
        with sigterm_raises(lambda signum: Terminated(128 + signum)):
            yield
    except Terminated:
        typer.echo("terminated; files downloaded before it are kept (complete and "
                   "hash-checked), no partial file is left", err=True)
        raise


@data_app.command("paper")
def paper_cmd(
    url: str = typer.Option(paperdata.BASE_URL, "--url", metavar="BASE", show_default=False,
                            help="Folder URL holding the files (default: Weights/ of the paper's "
                            f"repository at commit {paperdata.COMMIT[:7]}); a mirror or a "
                            "file:// folder must hold the same bytes."),
    cache: Path | None = typer.Option(None, "--cache", metavar="DIR",
                                      help="Folder to put the files in (default: "
                                      "$PACPLAN_CACHE/paper, else ~/.cache/pacplan/paper)."),
    force: bool = typer.Option(False, "--force", help="Download again even if the cache "
                               "already holds the right files."),
    timeout: float = typer.Option(paperdata.DEFAULT_TIMEOUT, "--timeout", metavar="SECONDS",
                                  help="Give up on a server silent this long."),
) -> None:
    """Download the paper's published UAV and Minitaur cost matrices and its priors, each
    checked against a pinned sha256 (a prior's torch files before they are read; stored as
    .npy)."""
    if cache is not None:  # never into a planner or run directory, nor the source folder
        source = paperdata.local_folder(url)
        refuse_overwriting(cache, "--cache", {"--url": source})
        if cache.exists() and not cache.is_dir():  # was "File exists", naming no option
            raise PacplanError(f"--cache {cache} is not a folder: give a folder for the "
                               "paper's files")
    with _terminate_cleanly():
        report = paperdata.fetch_paper_data(url, cache, force=force, timeout=timeout)
    stored = {t.source.name: t.stored.name for t in paperdata.PRIOR_FILES}
    for name in report.downloaded:
        also = f", stored as {stored[name]}" if name in stored else ""
        typer.echo(f"downloaded {name} (sha256 ok{also})")
    for name in report.cached:
        typer.echo(f"already cached {name} (sha256 ok)")
    directory = report.directory.resolve()
    typer.echo(f"the paper's files are in {directory}")
    if directory != paperdata.default_cache_dir().resolve():
        env = shlex.quote(str(directory))
        typer.echo(f"for the tests and examples: export PACPLAN_PAPER_DATA={env}")
    for line in certify_commands(directory):
        typer.echo(f"next: {line}")


@data_app.command("minitaur-prior")
def minitaur_prior_cmd(
    out: Path = typer.Argument(..., metavar="OUT", help="The .safetensors file to write: a new "
                               "file, or the missing prior.safetensors of a run certified "
                               "with it."),
) -> None:
    """Write the paper's published Minitaur prior as a pacplan prior file, for `pacplan run
    quadruped-paper-code --prior OUT` (after `pacplan data paper`); or put it back into a run
    shipped without it, byte for byte, as its manifest records."""
    from pacplan.pipeline.prior.paper_priors import write_minitaur_prior_file

    digest, restored = write_minitaur_prior_file(out)
    what = "put back into its run directory" if restored else "written"
    typer.echo(f"{out}: the paper's Minitaur prior {what} (sha256 {digest[:12]}…)")
