"""No tool branches on a world's name: outside `worlds/`, what differs between worlds comes
from the world's registry entry (`pacplan.worlds.story`), so adding a world touches `worlds/`
and its registration only.

Read from the source: a comparison with a registered world's name (`== "uav"`, `!= "gym"`,
`in ("uav", ...)`, a `match` case) outside `src/pacplan/worlds/`. Using a world by name
(`make_world("gym", ...)`) is not a branch.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pacplan.worlds.base import world_names

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

SRC = Path(__file__).resolve().parents[1] / "src" / "pacplan"

def _pattern() -> re.Pattern[str]:
    names = "|".join(re.escape(n) for n in world_names())
    quoted = rf"""["'](?:{names})["']"""
    return re.compile(rf"(?:[=!]=\s*{quoted})|(?:{quoted}\s*[=!]=)|(?:\bin\s*[(\[{{]\s*{quoted})"
                      rf"|(?:\bcase\s+{quoted})")


def branching_modules(src: Path = SRC) -> dict[str, list[str]]:
    """{module path under src/pacplan: the lines that compare with a world's name} outside
    worlds/."""
    pattern = _pattern()
    found: dict[str, list[str]] = {}
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith("worlds/"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line.split("#", 1)[0]):
                found.setdefault(rel, []).append(f"{rel}:{number}: {line.strip()}")
    return found


def test_no_tool_compares_a_world_name() -> None:
    found = branching_modules()
    lines = [line for found_in in found.values() for line in found_in]
    assert not found, ("these branch on a world's name; ask the world's registry entry instead "
                       "(pacplan.worlds.story):\n" + "\n".join(lines))


def test_the_check_catches_each_form(tmp_path: Path) -> None:
    pkg = tmp_path / "pacplan"
    (pkg / "worlds").mkdir(parents=True)
    (pkg / "worlds" / "fine.py").write_text('if name == "uav":\n    pass\n')
    (pkg / "tool.py").write_text('a = world == "uav"\nb = "gym" != w\nc = w in ("quadruped",)\n'
                                 'match w:\n    case "toy":\n        pass\n'
                                 'd = make_world("gym")  # == "uav" in a comment\n')
    found = branching_modules(pkg)
    assert list(found) == ["tool.py"]
    assert [line.split(":")[1] for line in found["tool.py"]] == ["1", "2", "3", "5"]
