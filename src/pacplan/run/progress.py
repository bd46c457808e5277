"""One Rich progress bar for every long step (ES iterations, cost-matrix chunks).

A disabled bar is a no-op object with the same methods, so callers never branch on `progress`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


class _Bar:
    def __init__(self, progress: Any, task: Any) -> None:
        self._progress = progress
        self._task = task

    def advance(self, description: str | None = None) -> None:
        """One more unit done; optionally a new description (e.g. the latest ES cost)."""
        if self._progress is None:
            return
        kwargs = {} if description is None else {"description": description}
        self._progress.update(self._task, advance=1, **kwargs)


@contextmanager
def progress_bar(enabled: bool, label: str, total: int, done: int = 0) -> Iterator[_Bar]:
    """A bar of `total` units with `done` already finished (shown when resuming)."""
    if not enabled:
        yield _Bar(None, None)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn())
    task = prog.add_task(label, total=total, completed=done)
    prog.start()
    try:
        yield _Bar(prog, task)
    finally:
        prog.stop()
