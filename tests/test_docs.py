"""The layouts in docs/design.md and docs/usage.md (the README's until 0.2.0) name every module
that exists, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "pacplan"
RUNTIME = REPO / "runtime" / "src" / "pacplan_runtime"  # the robot's wheel, `pacplan.runtime`


def _layout_block(markdown: Path) -> str:
    """The fenced block that starts with `src/pacplan/`."""
    blocks = re.findall(r"```\n(src/pacplan/.*?)```", markdown.read_text(), flags=re.S)
    assert blocks, f"{markdown} has no src/pacplan/ layout block"
    return blocks[0]


def _modules() -> set[str]:
    return {p.stem for src in (SRC, RUNTIME) for p in src.rglob("*.py") if p.stem != "__init__"}


def _packages() -> set[str]:
    return {p.parent.name for p in SRC.rglob("__init__.py") if p.parent != SRC}


def test_design_layout_names_every_module() -> None:
    words = set(re.findall(r"[A-Za-z_]+", _layout_block(REPO / "docs" / "design.md")))
    assert _modules() - words == set()
    assert _packages() - words == set()


def test_usage_layout_names_every_package_and_top_level_module() -> None:
    words = set(re.findall(r"[A-Za-z_]+", _layout_block(REPO / "docs" / "usage.md")))
    top = {p.stem for p in SRC.glob("*.py") if p.stem != "__init__"}
    assert top - words == set()
    assert _packages() - words == set()


def test_no_module_is_documented_that_does_not_exist() -> None:
    named = set(re.findall(r"([a-z_]+)\.py", _layout_block(REPO / "docs" / "design.md")))
    assert named - _modules() == set()
