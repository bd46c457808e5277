"""How the `pacplan` command prints: the certificate table, JSON, and one-line errors.

Every user-fixable problem ends as one line on stderr with exit code 2: `PacplanError`s, OS
errors (naming the path), and usage errors from the click that typer bundles as well as from
a separately installed click.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import math
import os
import shlex
import signal
import sys
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TextIO

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pacplan.choices import BOUNDS
from pacplan.pacbayes.record import Certificate
from pacplan.validation import count

console = Console()
err_console = Console(stderr=True)


def json_safe(obj: Any) -> Any:
    """`obj` with every non-finite float written as the string "inf", "-inf" or "nan" (as a
    certificate writes beta = "inf"): JSON has no such numbers, and `Infinity` is not JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def print_json(obj: dict, stream: TextIO | None = None) -> None:
    """One JSON object on stdout (or `stream`, the real stdout `stdout_to_stderr` yields):
    strict JSON, non-finite numbers as strings (`json_safe`)."""
    text = json.dumps(json_safe(obj), indent=2, allow_nan=False)
    if stream is None:
        typer.echo(text)
        return
    stream.write(text + "\n")
    stream.flush()


@contextlib.contextmanager
def stdout_to_stderr(active: bool = True) -> Iterator[TextIO]:
    """Send whatever runs inside to stderr, Python prints and C-level writes to fd 1 alike
    (processes started inside inherit it); yields the real stdout, for the one JSON object:
    under --json, stdout holds that object and nothing a user's code prints."""
    if not active:
        yield sys.stdout
        return
    real = sys.stdout
    real.flush()
    try:
        fd = real.fileno()
    except (AttributeError, OSError, ValueError):  # a captured stdout (tests): Python only
        fd = None
    saved = os.dup(fd) if fd is not None else None
    # the wrapper is closed in the finally below
    stream = real if saved is None else open(saved, "w", encoding="utf-8",  # noqa: SIM115
                                             closefd=False)
    try:
        if fd is not None and saved is not None:
            sys.stderr.flush()
            os.dup2(sys.stderr.fileno(), fd)
        with contextlib.redirect_stdout(sys.stderr):
            yield stream
    finally:
        if saved is not None and fd is not None:
            stream.close()  # the wrapper only: the fd is closed below, after it is restored
            sys.stderr.flush()
            os.dup2(saved, fd)
            os.close(saved)


def number_text(value: float, digits: int = 6) -> str:
    """A number for a table: fixed point, or `g` form when huge; never "inf" or a 150-digit
    string (an infinite bound is written ∞: vacuous)."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("∞" if value > 0 else "−∞")
    return f"{value:.{digits}f}" if abs(value) < 1e6 else f"{value:.{digits}g}"


def percent(value: float) -> str:
    """A cost or bound in percent for a table (∞ without a % sign when infinite)."""
    return number_text(100 * value, 2) + (" %" if math.isfinite(value) else "")


def bound_percent(value: float) -> str:
    """A bound for a table: ≥ 100 % (vacuous) when it is 1 or more (a cost in [0, 1] is
    always below it), ∞ when infinite."""
    from pacplan.report.tables import VACUOUS

    return VACUOUS if 1.0 <= value < math.inf else percent(value)


def vacuous_note(c: Certificate) -> str | None:
    """Why a certificate of 100 % or more says nothing, and what would make it say something."""
    if c.certified < 1.0:
        return None
    return (f"the certified bound is vacuous: with N = {c.n} environments and an empirical "
            f"cost of {percent(c.emp_cost)}, the data cannot bound the expected cost below "
            "100 %; certify on more environments, or policies of lower cost")


def certificate_table(c: Certificate) -> Table:
    table = Table(title=f"PAC-Bayes certificate (δ = {c.delta:g}, N = {c.n}, m = {c.m})")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("empirical cost Ĉ", percent(c.emp_cost))
    table.add_row("KL(p‖p0)", f"{c.kl:.4f}")
    for name in BOUNDS:
        mark = "  ← certified" if name == c.certified_by else ""
        table.add_row(f"{name} bound", f"{bound_percent(getattr(c, name))}{mark}")
    table.add_row("[bold]certified cost ≤[/]", f"[bold]{bound_percent(c.certified)}[/]")
    if c.test_cost is not None and c.test_ci is not None:
        lo, hi = c.test_ci
        table.add_row(f"test cost ({c.test_n} envs)",
                      f"{percent(c.test_cost)} [{percent(lo)[:-2]}, {percent(hi)[:-2]}] (99 %)")
    table.add_row("posterior", f"{c.solver}, {count(sum(v > 1e-3 for v in c.p), 'policy')} "
                  "with p > 0.001")
    if c.clip:
        table.add_row("clipped entries", str(c.cert_matrix.clipped +
                                              (c.test_matrix.clipped if c.test_matrix else 0)))
    table.caption = vacuous_note(c)
    return table


def click_exception_types() -> tuple[tuple[type, ...], tuple[type, ...], tuple[type, ...]]:
    """(usage errors, exits, aborts) of the click that typer bundles and of click itself.

    Newer typer raises its own bundled copy of click's exceptions, which are not
    `click.exceptions.*`; older typer raises click's. Both are caught.
    """
    errors: list[type] = []
    exits: list[type] = [typer.Exit]
    aborts: list[type] = [typer.Abort]
    for module_name in ("typer._click.exceptions", "click.exceptions"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        errors.append(module.ClickException)
        exits.extend(t for t in [getattr(module, "Exit", None)] if t is not None)
        aborts.extend(t for t in [getattr(module, "Abort", None)] if t is not None)
    return tuple(errors), tuple(exits), tuple(aborts)


def usage_line(exc: Exception) -> str:
    """One line for a click usage error, with the help command that explains it."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        return "no command given; `pacplan --help` lists the commands"
    text = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    return text + (f" (see `{ctx.command_path} --help`)" if ctx is not None else "")


def os_error_line(exc: OSError) -> str:
    """The path(s) and the OS's reason, e.g. `runs/x/config.yaml: Permission denied`."""
    paths = list(dict.fromkeys(str(p) for p in (exc.filename, exc.filename2) if p is not None))
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{' -> '.join(paths)}: {reason}" if paths else reason


def safe_text(text: str) -> str:
    """`text` with control characters (a file name's ESC codes, bells, line breaks) written
    as escapes: what reaches the terminal is what it shows, on one line."""
    return "".join(repr(ch)[1:-1] if unicodedata.category(ch).startswith("C") else ch
                   for ch in str(text))


def shown(path: object) -> str:
    """A path for a Rich line: control characters escaped and brackets not read as markup (a
    file named "[/bold]x.json" is a file name, not a style)."""
    return escape(safe_text(str(path)))


def fail(line: str, code: int = 2) -> NoReturn:
    err_console.print(f"[bold red]error:[/] {escape(safe_text(line))}", highlight=False,
                      soft_wrap=True)
    sys.exit(code)


_RUN_COMMANDS = ("run", "train-prior")


@contextlib.contextmanager
def sigterm_raises(exception: Callable[[int], BaseException]) -> Iterator[None]:
    """While the block runs, SIGTERM raises `exception(signum)` in the main thread, so the
    block unwinds (its cleanup runs) instead of the process dying; outside the main thread
    signals are left alone. The previous handler is restored."""
    def handler(signum: int, frame: object) -> None:
        raise exception(signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def sigterm_as_ctrl_c() -> contextlib.AbstractContextManager[None]:
    """While a run works, SIGTERM (`kill`, a scheduler's stop) unwinds like Ctrl-C: the
    finished chunks are kept either way, and this way the invocation's time is recorded and
    the line saying how to resume is printed."""
    return sigterm_raises(lambda _signum: KeyboardInterrupt())


def _command(argv: list[str]) -> str:
    return next((a for a in argv[1:] if not a.startswith("-")), "")


def _kept_and_resume(argv: list[str]) -> str:
    """The same command resumes a run bit-identically: said once, here, for every stop."""
    return ("finished work is kept in the run directory; resume with: "
            + shlex.join(["pacplan", *argv[1:]]))


def interrupted_line(argv: list[str]) -> str:
    """What Ctrl-C leaves behind: a run keeps its finished work in its run directory; other
    commands have none (a download keeps only complete, hash-checked files)."""
    command = _command(argv)
    if command in _RUN_COMMANDS:
        return "interrupted; " + _kept_and_resume(argv)
    if command == "data":
        return "interrupted; files downloaded before it are kept (complete and hash-checked), " \
               "no partial file is left"
    return "interrupted"


def error_line(exc: Exception, argv: list[str]) -> str:
    """A `PacplanError`'s line; where the run lost its workers (a Ray node died: nothing is
    wrong with its inputs), followed by what Ctrl-C's line says: the work kept, the command
    that resumes it."""
    if _command(argv) in _RUN_COMMANDS:
        from pacplan.pipeline.execution.executors import WorkersLost

        if isinstance(exc, WorkersLost):
            return f"{exc}; {_kept_and_resume(argv)}"
    return str(exc)


def show_flags_as_flags(command: Any) -> None:
    """Let --help show a flag as a flag: recent typer prints every option's type, so `--quiet`
    would read `--quiet <bool>` as if it took a value. An empty metavar hides the type of every
    flag, typer's own (--help, --install-completion) included; older typer shows none anyway.

    Every other value is named one way, in capitals as argparse and click name them
    (`--out OUT`, `CONFIG`, `RUN_DIR`), not typer's mix of `<path>`, `<int>` and bare names;
    typer itself marks an argument required `{X}` or optional `[X]` in the usage line."""
    for param in getattr(command, "params", []):
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""
        elif param.metavar is None and param.name:
            param.metavar = param.name.upper()
        elif param.param_type_name == "argument" and param.metavar.startswith("["):
            param.metavar = param.metavar.strip("[]")  # typer adds the brackets itself
    try:  # --help is made on demand (and cached by click); make it now to reach it
        help_option = command.get_help_option(command.context_class(command))
    except Exception:  # pragma: no cover - a click without this API: cosmetic only
        help_option = None
    if help_option is not None and help_option.metavar is None:
        help_option.metavar = ""
    for sub in getattr(command, "commands", {}).values():
        show_flags_as_flags(sub)


def one_paragraph_summaries(command: Any) -> None:
    """Give every subcommand a one-line summary for its group's --help: typer's rich mode keeps
    the docstring's line breaks in the command list, so a summary broke mid-sentence where the
    source wrapped ("… risen above its" / "certified cost"). The summary is the docstring's
    first paragraph with its whitespace joined; a command's own --help is left as it is."""
    for sub in getattr(command, "commands", {}).values():
        if sub.short_help is None and sub.help:
            first = inspect.cleandoc(sub.help).partition("\f")[0].split("\n\n")[0]
            sub.short_help = " ".join(first.split())
        one_paragraph_summaries(sub)
