"""`pacplan monitor PLANNER COSTS`: is a deployed planner still meeting its certificate?

Reads one episode's cost per line (CSV, or JSON lines for .jsonl/.ndjson/.json files), feeds
them in order to `pacplan.runtime.CertificateMonitor` built from the planner's certified cost,
and prints the verdict and the anytime-valid lower bound on the deployed mean cost. A line that
is not a cost in [0, 1] is one error naming the file and line (exit 2); nothing is clipped.
Registered by `cli.py` (`app.command("monitor")(monitor_cmd)`); exit 1 on an alarm, so a
script can act on it.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import numpy as np
import typer

from pacplan.cli_output import console, fail
from pacplan.errors import PacplanError

JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")


def _number(text: str, where: str) -> float:
    """A cost parsed from text, checked to be in [0, 1] (never clipped)."""
    try:
        x = float(text)
    except ValueError:
        raise PacplanError(f"{where}: {text.strip()!r} is not a number") from None
    return _checked(x, where)


def _checked(x: float, where: str) -> float:
    if math.isnan(x):
        raise PacplanError(f"{where}: NaN is not a cost")
    if not 0.0 <= x <= 1.0:
        raise PacplanError(f"{where}: {x!r} is not a cost in [0, 1]")
    return x


def _csv_costs(path: Path, text: str) -> list[float]:
    """One cost per row, or a header row naming a `cost` column and one row per episode."""
    rows = [(n, row) for n, row in enumerate(csv.reader(text.splitlines()), start=1)
            if any(field.strip() for field in row)]
    column, width = 0, 1
    if rows:
        names = [field.strip().lower() for field in rows[0][1]]
        if "cost" in names:
            column, width = names.index("cost"), len(names)
            rows = rows[1:]
    costs = []
    for n, row in rows:
        where = f"{path} line {n}"
        if len(row) != width:
            raise PacplanError(f"{where}: {len(row)} fields; give one cost per line, or a "
                               f"header row naming a 'cost' column" if width == 1 else
                               f"{where}: {len(row)} fields, the header has {width}")
        costs.append(_number(row[column], where))
    return costs


def _json_costs(path: Path, text: str) -> list[float]:
    """One JSON number, or an object with a "cost" number, per non-blank line."""
    costs = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path} line {n}"
        try:
            value = json.loads(line)
        except ValueError:
            raise PacplanError(f"{where}: not JSON ({line.strip()[:40]!r})") from None
        if isinstance(value, dict):
            if "cost" not in value:
                raise PacplanError(f"{where}: an object without a \"cost\" key")
            value = value["cost"]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PacplanError(f"{where}: {value!r} is not a number")
        costs.append(_checked(float(value), where))
    return costs


def read_costs(path: Path) -> np.ndarray:
    """The episodes' costs in file order; a PacplanError naming the line of any bad one."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PacplanError(f"{path}: not a text file (UTF-8)") from None
    if path.suffix.lower() in JSON_SUFFIXES:
        costs = _json_costs(path, text)
    else:
        costs = _csv_costs(path, text)
    if not costs:
        raise PacplanError(f"{path}: no costs (one episode's cost per line)")
    return np.asarray(costs, dtype=np.float64)


def monitor_cmd(
    planner: Path = typer.Argument(..., help="Planner directory (pacplan export) whose "
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
    from pacplan.runtime import CertificateMonitor, Planner, PlannerError

    try:
        certified = Planner.load(planner).certified_cost
        monitor = CertificateMonitor(certified, alpha)
    except PlannerError as exc:
        fail(str(exc))
    values = read_costs(costs)
    lower = np.empty(len(values))
    for i, x in enumerate(values):
        monitor.update(float(x))
        lower[i] = monitor.lower
    level = f"{100 * (1 - monitor.alpha):g} %"
    console.print(f"planner {planner}: certified cost ≤ {100 * certified:.2f} %; "
                  f"{monitor.episodes} episodes, mean cost {100 * values.mean():.2f} %",
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
    if plot is not None:
        _plot(plot, lower, values, certified, monitor.alarm_episode, level)
        console.print(f"wrote {plot}", soft_wrap=True, highlight=False)
    if monitor.alarm:
        raise typer.Exit(1)


def _plot(path: Path, lower: np.ndarray, values: np.ndarray, certified: float,
          alarm: int | None, level: str) -> None:
    """Lower bound and running mean against episodes, the certified cost as a dashed line."""
    from pacplan.plotting import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    episodes = np.arange(1, len(values) + 1)
    ax.plot(episodes, 100 * np.cumsum(values) / episodes, color="0.6", lw=1,
            label="mean cost so far")
    ax.plot(episodes, 100 * lower, color="tab:blue", label=f"lower bound ({level}, anytime)")
    ax.axhline(100 * certified, color="k", ls="--", label=f"certified {100 * certified:.2f} %")
    if alarm is not None:
        ax.axvline(alarm, color="tab:red", lw=1, label=f"alarm at episode {alarm}")
    ax.set_xlabel("episode")
    ax.set_ylabel("cost (%)")
    ax.set_ylim(0, max(100 * certified * 2, 100 * float(values.mean()) * 1.3, 1))
    ax.legend(loc="upper right", fontsize=8)
    save_figure(fig, path)
