"""One exception type for every problem a user can fix: the CLI prints it as one line, exit 2;
and `short`, how every such message shows a value it was given."""

from __future__ import annotations

import json
from typing import Any


class PacplanError(ValueError):
    """Bad input, a bad file or an inconsistent run directory; the message names the problem."""


class CostRangeError(PacplanError):
    """A world's raw outcome lies outside the range its options declare (a Gymnasium return
    outside `return_bounds`): `check_world` names it `in_declared_range`, not a shape problem."""


class UnidentifiedInputWarning(UserWarning):
    """A certificate's input is a Python object whose state is in no file (a lambda, a closure,
    a callable object, an environment instance): it cannot be re-verified from files and its
    folder cannot be resumed. Filter it like any warning (`warnings.simplefilter("ignore",
    pacplan.UnidentifiedInputWarning)`) once you have read it."""


class NotCheckedWarning(UserWarning):
    """`pacplan.verify` could not re-check something a certificate rests on (a recorded file
    not found, a Python object no file holds): the certificate verified for the rest.
    `pacplan.verify(path, strict=True)` raises instead."""


class SensorFaultWarning(UserWarning):
    """A rollout read a depth image or proprioception that was not finite (PyBullet's
    TinyRenderer can leave NaN pixels): the rollout ended there with cost 1 (the worst cost, so
    the certificate holds whatever the reading should have been)."""


PACPLAN_WARNINGS = (UnidentifiedInputWarning, NotCheckedWarning, SensorFaultWarning)


def one_line_warnings() -> None:
    """Print pacplan's own warnings as `warning: <message>`, one line like the CLI's errors,
    without the file, line and source line Python adds (which name pacplan's code, not the
    user's problem); other warnings keep Python's format. For the CLI and its worker
    processes, whose stderr the user reads."""
    import warnings

    python_format = warnings.formatwarning
    if getattr(python_format, "pacplan", False):
        return

    def formatwarning(message: Warning | str, category: type[Warning], filename: str,
                      lineno: int, line: str | None = None) -> str:
        if issubclass(category, PACPLAN_WARNINGS):
            return f"warning: {message}\n"
        return python_format(message, category, filename, lineno, line)

    formatwarning.pacplan = True  # type: ignore[attr-defined]
    warnings.formatwarning = formatwarning


def short(value: Any, limit: int = 60, *, as_json: bool = False) -> str:
    """`value` for a message: its repr (or JSON) on one line, cut to `limit` characters."""
    try:
        text = json.dumps(value, sort_keys=True, default=repr) if as_json else repr(value)
    except ValueError:  # an integer of over 4300 digits (or one inside) has no repr or JSON
        if isinstance(value, int):
            return f"an integer of {value.bit_length()} bits"
        return f"a {type(value).__name__} holding an integer too large to show"
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[:limit - 1]}… ({len(text)} characters)"
