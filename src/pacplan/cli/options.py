"""Options and arguments several commands share (a config, --bound, --executor, --delta), their
shell completion, and how --executor/--workers/--address apply to a loaded config."""

from __future__ import annotations

import typer

from pacplan.choices import BOUND_CHOICES, EXECUTORS
from pacplan.presets import list_presets, shipped_priors


def choices(names: tuple[str, ...]) -> str:
    """How a choice option shows its values in --help: [a|b|c]."""
    return "[" + "|".join(names) + "]"


def completer(names: tuple[str, ...]):
    """Shell completion of one of `names` (the value is still checked by `check_choice`)."""
    def complete(incomplete: str) -> list[str]:
        return [n for n in names if n.startswith(incomplete)]
    return complete


def complete_preset(incomplete: str) -> list[str]:
    """Preset names for `pacplan run <TAB>`; the shell adds file names when none match."""
    return [p.name for p in list_presets() if p.name.startswith(incomplete)]


def complete_prior(incomplete: str) -> list[str]:
    return [name for name in shipped_priors() if name.startswith(incomplete)]


BoundOpt = typer.Option(
    "best", "--bound", metavar=choices(BOUND_CHOICES), autocompletion=completer(BOUND_CHOICES),
    help="Bound to minimize (best: the smallest of the three)."
)
ExecutorOpt = typer.Option(
    None, "--executor", metavar=choices(EXECUTORS), autocompletion=completer(EXECUTORS),
    help="Where rollouts run (default: the config's); never changes a result."
)
ConfigArg = typer.Argument(..., metavar="CONFIG", autocompletion=complete_preset,
                           help="A run config (YAML file) or a preset name, e.g. uav-quick "
                           "(`pacplan presets` lists them); a file of that name wins.")
DeltaOpt = typer.Option(0.01, "--delta", help="Confidence parameter δ in (0, 1).")
