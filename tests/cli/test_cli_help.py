"""`pacplan --help` at a fixed width: every command's summary is one paragraph, wrapped only
where the terminal's width makes it wrap, never where the docstring's source line ended.

The check, precisely: in a Commands panel, a description line that is followed by a
continuation line of the same description must be too full to take the continuation's first
word (its length + a space + that word exceed the column). A line that ends early means a
newline from the docstring leaked into the help (what `--help` showed before: "… has risen
above its" / "certified cost …"). The panel's text, joined, must also be the docstring's first
paragraph: the summary is that paragraph, not a cut or rewritten one. A command's own --help
opening paragraph is held to the same rule, and no option's help holds a newline."""

from __future__ import annotations

import inspect
from itertools import pairwise
from typing import Any

import pytest
import typer

from helpers import cli
from pacplan.cli import app

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

WIDTH = 100


def _tree() -> list[tuple[list[str], Any]]:
    """(argv prefix, click command) for the app and every command under it."""
    found: list[tuple[list[str], Any]] = []

    def walk(path: list[str], command: Any) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk([*path, name], sub)

    walk([], typer.main.get_command(app))
    return found


def _first_paragraph(command: Any) -> str:
    return " ".join(inspect.cleandoc(command.help or "").partition("\f")[0]
                    .split("\n\n")[0].split())


def _help(argv: list[str], capsys: pytest.CaptureFixture[str],
          monkeypatch: pytest.MonkeyPatch) -> list[str]:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    monkeypatch.setenv("TERMINAL_WIDTH", str(WIDTH))
    code, out, err = cli([*argv, "--help"], capsys)
    assert code == 0, err
    return out.splitlines()


def _commands_panel(lines: list[str]) -> dict[str, list[str]]:
    """{command: its description's rendered lines} of the Commands panel; checks wrapping."""
    start = next(i for i, line in enumerate(lines) if "─ Commands ─" in line)
    rows = []
    for line in lines[start + 1:]:
        if not line.startswith("│"):
            break
        rows.append(line)
    first = rows[0]
    name = first[2:].split()[0]
    column = first.index(first[2 + len(name):].lstrip(), 2 + len(name))
    width = first.rindex("│") - 1 - column  # the description column, less its right padding
    out: dict[str, list[str]] = {}
    current = ""
    for row in rows:
        head, text = row[2:column].strip(), row[column:row.rindex("│")].rstrip()
        if head:
            current = head
            out[current] = []
        out[current].append(text.strip())
    for command, texts in out.items():
        for line, after in pairwise(texts):
            assert len(line) + 1 + len(after.split()[0]) > width, (
                f"{command}: the summary breaks early after {line!r} (the next word "
                f"{after.split()[0]!r} fits in the {width}-column description)")
    return out


def test_every_group_lists_one_paragraph_summaries(capsys, monkeypatch) -> None:
    groups = [(path, c) for path, c in _tree() if getattr(c, "commands", None)]
    assert len(groups) >= 2  # pacplan and pacplan data
    for path, group in groups:
        panel = _commands_panel(_help(path, capsys, monkeypatch))
        assert set(panel) == set(group.commands), path
        for name, sub in group.commands.items():
            assert " ".join(panel[name]) == _first_paragraph(sub), f"pacplan {name}"


@pytest.mark.parametrize("path", [p for p, _ in _tree() if p], ids=" ".join)
def test_each_commands_own_help_opens_with_one_paragraph(path, capsys, monkeypatch) -> None:
    lines = _help(path, capsys, monkeypatch)
    usage = next(i for i, line in enumerate(lines) if line.strip().startswith("Usage:"))
    paragraph = []
    for line in lines[usage + 2:]:
        if not line.strip():
            break
        paragraph.append(line.strip())
    width = WIDTH - 2  # one space of padding each side
    for line, after in pairwise(paragraph):
        assert len(line) + 1 + len(after.split()[0]) > width, (path, line)


def test_no_option_help_holds_a_newline() -> None:
    options = [p for _, c in _tree() for p in c.params if getattr(p, "help", None)]
    assert options and not [p.name for p in options if "\n" in p.help]
