"""One progress display for every long step (ES iterations, cost-matrix chunks).

On a terminal or in a notebook it is a Rich bar. Written to a file or a pipe (`nohup pacplan
run … > log`, a batch scheduler) a bar would show nothing until the step ends, so there it is a
plain line every few minutes instead: done/total, the rate of this invocation and the time left
at that rate. A disabled display is a no-op object with the same methods, so callers never
branch.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TextIO

LINE_EVERY_S = 300.0  # a plain progress line at most this often


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


def duration(seconds: float) -> str:
    """'40.0 s', '7 min', '2 h 5 min': coarse, for a human reading a log or a report."""
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


class LineProgress:
    """Progress as plain lines: one when `every_s` has passed since the last, and one at the
    end. The rate counts only units done in this invocation (resumed ones took no time here)."""

    def __init__(self, label: str, total: int, done: int = 0, stream: TextIO | None = None,
                 every_s: float = LINE_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total, self.done = label, total, done
        self._start_done = done
        self._note: str | None = None
        self._stream = stream
        self._every = every_s
        self._clock = clock
        self._t0 = self._last = clock()

    def advance(self, description: str | None = None) -> None:
        """One more unit done (`description`, e.g. the latest ES cost, ends the next line)."""
        self.done += 1
        self._note = description
        now = self._clock()
        if now - self._last >= self._every:
            self._last = now
            self._write(self.line(now))

    def line(self, now: float | None = None) -> str:
        """'cert costs: 320/500 (64 %), 1.45 a minute, about 2 h 8 min left'."""
        now = self._clock() if now is None else now
        text = f"{self.label}: {self.done}/{self.total} ({100 * self.done // max(self.total, 1)} %)"
        here, elapsed = self.done - self._start_done, now - self._t0
        if here > 0 and elapsed > 0:
            rate = here / elapsed
            per_min = rate * 60
            text += f", {per_min:,.0f} a minute" if per_min >= 10 else f", {per_min:.3g} a minute"
            if self.done < self.total:
                text += f", about {duration((self.total - self.done) / rate)} left"
            else:
                text += f", {here} in {duration(elapsed)}"
        return text if self._note is None else f"{text}; {self._note}"

    def finish(self) -> None:
        """The last line, when any unit was done here (a step that had nothing left says
        nothing more than its 'resumed' line)."""
        if self.done > self._start_done:
            self._write(self.line())

    def _write(self, text: str) -> None:
        stream = self._stream if self._stream is not None else sys.stdout
        print(text, file=stream, flush=True)


@contextmanager
def progress_bar(enabled: bool, label: str, total: int, done: int = 0
                 ) -> Iterator[_Bar | LineProgress]:
    """A display of `total` units with `done` already finished (shown when resuming): a Rich
    bar on a terminal, plain lines elsewhere."""
    if not enabled:
        yield _Bar(None, None)
        return
    from rich.console import Console

    console = Console()
    if not (console.is_terminal or console.is_jupyter):  # a notebook draws Rich's bar itself
        lines = LineProgress(label, total, done)
        try:
            yield lines
        finally:
            lines.finish()
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
