"""`pacplan monitor PLANNER COSTS`: is a deployed planner still meeting its certificate?

Reads one episode's cost per line (CSV, or JSON lines for .jsonl/.ndjson/.json files), feeds
them in order to `pacplan.runtime.CertificateMonitor` built from the planner's certified cost,
and prints the verdict and the anytime-valid lower bound on the deployed mean cost. A line that
is not a cost in [0, 1] is one error naming the file and line (exit 2); nothing is clipped.
Registered by `cli.py` (`app.command("monitor")(monitor_cmd)`); exit 1 on an alarm, so a
script can act on it.

The log is streamed: read line by line (a line over `MAX_LINE` characters is refused, so memory
stays constant however large the file) and fed to the monitor in blocks (`update_many`, the
same verdict and bound as one cost at a time). Only a regular file is read: a FIFO or a device
would block or never end.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import typer

from pacplan.cli.output import console, fail, shown
from pacplan.errors import PacplanError, short
from pacplan.io.files import open_regular
from pacplan.io.outputs import folder_kind, refuse_overwriting

JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
MAX_LINE = 1 << 20
"""Longest line read (characters): an episode's line is a few bytes, with a JSON record's other
fields a few hundred; a longer one is not a cost log, and reading it whole could exhaust
memory."""
CHUNK = 8192
"""Costs parsed before they are fed to the monitor at once."""
_NUMBER_CHARS = frozenset("0123456789+-.eE")
_WORDS = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity",
                    "-infinity"})


def _checked(x: float, where: str) -> float:
    if math.isnan(x):
        raise PacplanError(f"{where}: NaN is not a cost")
    if not 0.0 <= x <= 1.0:
        raise PacplanError(f"{where}: {x!r} is not a cost in [0, 1]")
    return x


def _number(text: str, where: str) -> float:
    """A cost parsed from a CSV field: an ASCII decimal number (not Python's wider float
    syntax: no 1_0, no other scripts' digits), checked to be in [0, 1] (never clipped)."""
    field = text.strip()
    try:
        if field.lower() in _WORDS or (field and _NUMBER_CHARS.issuperset(field)):
            x = float(field)
        else:
            raise ValueError(field)
    except ValueError:
        raise PacplanError(f"{where}: {field[:40]!r} is not a number") from None
    return _checked(x, where)


class _Record(dict):
    """A JSON object, remembering whether it named "cost" twice (json keeps the last value
    silently, so `{"cost": 0.9, "cost": 0.1}` would count as 0.1)."""

    two_costs = False


def _object(pairs: list[tuple[str, Any]]) -> _Record:
    """json's object_pairs_hook: a `_Record` of the pairs."""
    out = _Record()
    for key, value in pairs:
        if key == "cost" and key in out:
            out.two_costs = True
        out[key] = value
    return out


def _two_costs(where: str) -> PacplanError:
    return PacplanError(f"{where}: two 'cost' fields; which one is the episode's cost?")


def _lines(stream: TextIO, label: str) -> Iterator[str]:
    """The stream's lines (ends kept), each at most MAX_LINE characters."""
    n = 0
    while True:
        try:
            line = stream.readline(MAX_LINE + 1)
        except UnicodeDecodeError:
            raise PacplanError(f"{label}: not a text file (UTF-8)") from None
        if not line:
            return
        n += 1
        if len(line) > MAX_LINE:
            raise PacplanError(f"{label} line {n}: longer than {MAX_LINE:,} characters; one "
                               "episode's cost per line")
        yield line


def csv_costs(stream: TextIO, label: str) -> Iterator[float]:
    """One cost per row, or a header row naming a `cost` column and one row per episode;
    blank rows are skipped. Errors are PacplanErrors naming `label` and the line."""
    reader = csv.reader(_lines(stream, label))
    column, width, first = 0, 1, True
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise PacplanError(f"{label} line {reader.line_num}: not CSV ({exc})") from None
        where = f"{label} line {reader.line_num}"
        if not any(field.strip() for field in row):
            continue
        if first:
            first = False
            names = [field.strip().lower() for field in row]
            if names.count("cost") > 1:
                raise _two_costs(where)
            if "cost" in names:
                column, width = names.index("cost"), len(names)
                continue
        if len(row) != width:
            raise PacplanError(f"{where}: {len(row)} fields; give one cost per line, or a "
                               f"header row naming a 'cost' column" if width == 1 else
                               f"{where}: {len(row)} fields, the header has {width}")
        yield _number(row[column], where)


def json_costs(stream: TextIO, label: str) -> Iterator[float]:
    """One JSON number, or an object with one "cost" number, per non-blank line. Errors are
    PacplanErrors naming `label` and the line."""
    for n, line in enumerate(_lines(stream, label), start=1):
        if not line.strip():
            continue
        where = f"{label} line {n}"
        try:  # integers as floats: a 400-digit one is inf (refused), not an OverflowError
            value = json.loads(line, object_pairs_hook=_object, parse_int=float)
        except RecursionError:
            raise PacplanError(f"{where}: JSON nested too deeply to be a cost") from None
        except ValueError:
            raise PacplanError(f"{where}: not JSON ({line.strip()[:40]!r})") from None
        if isinstance(value, dict):
            if getattr(value, "two_costs", False):
                raise _two_costs(where)
            if "cost" not in value:
                raise PacplanError(f"{where}: an object without a \"cost\" key")
            value = value["cost"]
        if isinstance(value, bool) or not isinstance(value, float):
            raise PacplanError(f"{where}: {short(value, 40)} is not a number")
        yield _checked(value, where)


def open_log(path: Path) -> TextIO:
    """The cost log opened as UTF-8 text for streaming; a PacplanError unless it is a regular
    file (a FIFO or a device would block, or never end: `files.open_regular`)."""
    raw = open_regular(path, "the cost log")
    # utf-8-sig: a leading byte-order mark (Excel's "CSV UTF-8") is not part of the header
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def iter_costs(path: Path, chunk: int | None = None) -> Iterator[np.ndarray]:
    """The episodes' costs in file order, `chunk` (default CHUNK) at a time; a PacplanError
    naming the line of any bad one (after the chunks before it)."""
    chunk = chunk or CHUNK
    with open_log(path) as stream:
        parse = json_costs if path.suffix.lower() in JSON_SUFFIXES else csv_costs
        buffer: list[float] = []
        for x in parse(stream, str(path)):
            buffer.append(x)
            if len(buffer) == chunk:
                yield np.array(buffer)
                buffer = []
        if buffer:
            yield np.array(buffer)


def read_costs(path: Path) -> np.ndarray:
    """The episodes' costs in file order, all at once (for small logs and tests)."""
    chunks = list(iter_costs(path))
    if not chunks:
        raise PacplanError(f"{path}: no costs (one episode's cost per line)")
    return np.concatenate(chunks)


class _Trace:
    """What the plot needs in constant memory: the lower bound where it rose (it only rises,
    by grid steps: a few hundred points at most) and the running mean at most 2 × `points`
    evenly spaced episodes (every other one dropped, and the spacing doubled, when full)."""

    def __init__(self, points: int = 4000) -> None:
        self.points = points
        self.rises: list[tuple[int, float]] = []
        self.episodes: list[int] = []
        self.means: list[float] = []
        self.step = 1

    def add(self, start: int, costs: np.ndarray, lowers: np.ndarray, total: float) -> None:
        """Episodes start+1 … start+len(costs); `total` is the sum of costs before them."""
        last = self.rises[-1][1] if self.rises else 0.0
        for i in np.flatnonzero(np.diff(lowers, prepend=last) > 0):
            self.rises.append((start + int(i) + 1, float(lowers[i])))
        sums = total + np.cumsum(costs)
        episode = np.arange(start + 1, start + costs.size + 1)
        keep = episode % self.step == 0
        self.episodes += episode[keep].tolist()
        self.means += (sums[keep] / episode[keep]).tolist()
        while len(self.episodes) > 2 * self.points:
            self.step *= 2
            kept = [i for i, e in enumerate(self.episodes) if e % self.step == 0]
            self.episodes = [self.episodes[i] for i in kept]
            self.means = [self.means[i] for i in kept]


def monitor_cmd(
    planner: Path = typer.Argument(..., help="Planner directory (pacplan export), or a "
                                             "certify-policy folder or run directory, whose "
                                             "certificate is watched."),
    costs: Path = typer.Argument(..., help="CSV (one cost per line, or a header with a 'cost' "
                                           "column) or JSON lines (.jsonl): one episode's cost "
                                           "in [0, 1] per line, in order."),
    alpha: float = typer.Option(0.01, "--alpha", help="False-alarm probability, over the whole "
                                "deployment however long (anytime-valid)."),
    plot: Path | None = typer.Option(None, "--plot", help="Write a PNG of the lower bound "
                                     "against episodes beside the certified cost."),
) -> None:
    """Test, after every episode, whether a deployed planner's mean cost has risen above its
    certified cost (anytime-valid); print the verdict and a lower bound on the mean cost.
    Exit 1 on an alarm."""
    from pacplan.runtime import CertificateMonitor, PlannerError

    if plot is not None:  # a PNG over the log or into the planner would destroy it
        refuse_overwriting(plot, "--plot", {"COSTS": costs, "PLANNER": planner},
                           file=True)
    kind = folder_kind(planner)
    try:
        certified = _certified_cost(planner, kind)
        monitor = CertificateMonitor(certified, alpha)
    except PlannerError as exc:
        fail(str(exc))
    trace = _Trace() if plot is not None else None
    total = 0.0
    for values in iter_costs(costs):
        start = monitor.episodes
        lowers = monitor.update_many(values)
        if trace is not None:
            trace.add(start, values, lowers, total)
        total += float(np.sum(values))
    if monitor.episodes == 0:
        raise PacplanError(f"{costs}: no costs (one episode's cost per line)")
    mean = total / monitor.episodes
    level = _level(monitor.alpha)
    what = kind or "planner"
    console.print(f"{what.removesuffix(' directory')} {shown(planner)}: certified cost ≤ "
                  f"{100 * certified:.2f} %; "
                  f"{monitor.episodes} episodes, mean cost {100 * mean:.2f} %",
                  soft_wrap=True, highlight=False)
    if monitor.alarm:
        console.print(f"[red]ALARM[/] at episode {monitor.alarm_episode}: the deployed mean cost "
                      f"is above the certified cost (false-alarm probability ≤ alpha = "
                      f"{monitor.alpha:g} if it were not)", soft_wrap=True, highlight=False)
    else:
        console.print(f"[green]holding[/]: no alarm in {monitor.episodes} episodes "
                      f"(alpha = {monitor.alpha:g})", soft_wrap=True, highlight=False)
    console.print(f"lower bound on the deployed mean cost: {100 * monitor.lower:.1f} % "
                  f"({level}, valid at every episode at once)", soft_wrap=True, highlight=False)
    if plot is not None and trace is not None:
        _plot(plot, trace, monitor.episodes, mean, certified, monitor.alarm_episode, level)
        console.print(f"wrote {shown(plot)}", soft_wrap=True, highlight=False)
    if monitor.alarm:
        raise typer.Exit(1)


def _certified_cost(watched: Path, kind: str | None) -> float:
    """The certified cost the monitor watches: a planner's (every file checked as on load), or
    the certificate.json of a certify-policy folder or run directory, verified from its
    matrices (what is monitored needs the certificate, not a planner: a callable policy cannot
    be exported, yet its deployment can be watched); `kind` is `folder_kind(watched)`."""
    from pacplan.runtime import Planner

    if kind in ("certify-policy directory", "run directory"):
        from pacplan.policy_certification.provenance import verify_saved_certificate

        certificate = watched / "certificate.json"
        if not certificate.is_file():
            raise PacplanError(f"{watched}: no certificate.json yet; finish the run that "
                               "certifies it first")
        return verify_saved_certificate(certificate).certified
    return Planner.load(watched).certified_cost


def _level(alpha: float) -> str:
    """The confidence level 1 − alpha as a percentage, or as 1 − alpha when it would print as
    100 %."""
    text = f"{100 * (1 - alpha):g}"
    return f"level 1 − {alpha:g}" if text == "100" else f"{text} %"


def _plot(path: Path, trace: _Trace, episodes: int, mean: float, certified: float,
          alarm: int | None, level: str) -> None:
    """Lower bound and running mean against episodes, the certified cost as a dashed line."""
    from pacplan.io.plotting import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(trace.episodes, 100 * np.asarray(trace.means), color="0.6", lw=1,
            label="mean cost so far")
    steps = [(1, 0.0), *trace.rises, (episodes, trace.rises[-1][1] if trace.rises else 0.0)]
    ax.step([e for e, _ in steps], [100 * v for _, v in steps], where="post", color="tab:blue",
            label=f"lower bound ({level}, anytime)")
    ax.axhline(100 * certified, color="k", ls="--", label=f"certified {100 * certified:.2f} %")
    if alarm is not None:
        ax.axvline(alarm, color="tab:red", lw=1, label=f"alarm at episode {alarm}")
    ax.set_xlabel("episode")
    ax.set_ylabel("cost (%)")
    ax.set_ylim(0, min(100, max(100 * certified * 2, 100 * mean * 1.3, 1)))  # costs ≤ 100 %
    ax.legend(loc="upper right", fontsize=8)
    save_figure(fig, path)
