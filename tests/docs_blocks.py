"""The ```python blocks of a docs page, and running them as a reader pastes them.

A page's blocks run in order in one namespace (`__name__ == "__main__"`, as in `python`), in an
empty folder that is also on `sys.path`. A block whose first line is `# NAME.py` is the module
the reader saves: it is written to the folder as NAME.py, not run. A block preceded by the line
`<!-- skip-test: REASON -->` is not run (for code that needs a robot); use it sparingly.
"""

from __future__ import annotations

import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_SKIP = re.compile(r"^\s*<!--\s*skip-test:(?P<reason>.*?)-->\s*$")
_MODULE = re.compile(r"# (\w+\.py)\s*$")
PYTHON = {"python", "py", "python3"}


@dataclass(frozen=True)
class Block:
    """One ```python block: where it starts (1-based line of its fence), its code, dedented,
    and why it is skipped (None: it runs)."""

    line: int
    code: str
    skip: str | None

    @property
    def module(self) -> str | None:
        """NAME.py when the block is a file the reader saves (first line `# NAME.py`)."""
        first = self.code.split("\n", 1)[0]
        match = _MODULE.fullmatch(first)
        return match.group(1) if match else None


def python_blocks(text: str) -> list[Block]:
    """The page's Python blocks in order; other fences (yaml, bash, text) are passed over
    whole, so a ```python line inside one is not a block."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _OPEN.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence = opened["indent"], opened["fence"]
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if opened["lang"] in PYTHON:
            body = [ln[len(indent):] if ln.startswith(indent) else ln
                    for ln in lines[i + 1:end]]
            prev = next((ln for ln in reversed(lines[:i]) if ln.strip()), "")
            skip = _SKIP.match(prev)
            blocks.append(Block(i + 1, textwrap.dedent("\n".join(body)) + "\n",
                                skip["reason"].strip() if skip else None))
        i = end + 1
    return blocks


def skip_markers(text: str) -> list[tuple[int, str]]:
    """(line, reason) of every skip marker on the page."""
    return [(n, m["reason"].strip()) for n, line in enumerate(text.splitlines(), 1)
            if (m := _SKIP.match(line))]


class BlockFailed(AssertionError):
    """A docs block raised: names the page and the line of the block's fence."""


def run_page(page: Path, folder: Path, label: str | None = None) -> dict[str, object]:
    """Run the page's blocks in `folder` (the caller makes it the working directory and puts
    it on sys.path); returns the namespace. A block that raises is a `BlockFailed` naming it."""
    label = label or page.name
    namespace: dict[str, object] = {"__name__": "__main__"}
    for block in python_blocks(page.read_text(encoding="utf-8")):
        if block.skip is not None:
            continue
        if block.module is not None:
            (folder / block.module).write_text(block.code, encoding="utf-8")
            sys.modules.pop(block.module[:-3], None)  # a stale copy from another page
            continue
        code = compile(block.code, f"{label}:{block.line}", "exec")
        try:
            exec(code, namespace)
        except Exception as exc:
            raise BlockFailed(f"{label}: the block at line {block.line} raised "
                              f"{type(exc).__name__}: {exc}") from exc
    return namespace
