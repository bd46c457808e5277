"""The package layout's dependency rule (docs/design.md §2.2), read from the source: every
import under src/pacplan, at module level or inside a function, points down the layer table
below or stays in its layer, and no modules import each other, directly or round a loop.

Layers, low to high (a module may import its own layer and those below):

    0 basics      errors, choices, validation, portable, extras
    1 io          pacplan.io.*: files, YAML, weights, output paths, paper data, plotting
    2 config      config (run, training), presets
    3 libraries   pacbayes, es, worlds, runtime
    4 pipeline    pacplan.pipeline.*: the pipeline behind `pacplan run` and its stages
    5 report      pacplan.report.*: a consumer of finished runs
    6 tools       export, policy_certification
    7 front door  pacplan (the package), api
    8 cli         pacplan.cli.*, pacplan.__main__

`import pacplan` (for `__version__` or the package's folder) is allowed anywhere: Python runs
the package's __init__ before any of its modules anyway, so it adds no dependency.

An import path in a string ("pacplan.worlds.uav:UAVWorld", "pacplan.api") is an import made
later (a registry entry, a lazy attribute): it counts as an edge like any import statement.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

SRC = Path(__file__).resolve().parents[1] / "src"

LAYERS: tuple[tuple[int, str, tuple[str, ...]], ...] = (
    (0, "basics", ("pacplan.errors", "pacplan.choices", "pacplan.validation", "pacplan.portable",
                   "pacplan.extras")),
    (1, "io", ("pacplan.io",)),
    (2, "config", ("pacplan.config", "pacplan.presets")),
    (3, "libraries", ("pacplan.pacbayes", "pacplan.es", "pacplan.worlds",
                      "pacplan.runtime")),
    (4, "pipeline", ("pacplan.pipeline",)),
    (5, "report", ("pacplan.report",)),
    (6, "tools", ("pacplan.export", "pacplan.policy_certification")),
    (7, "front door", ("pacplan.api",)),
    (8, "cli", ("pacplan.cli", "pacplan.__main__")),
)


def layer_of(module: str) -> tuple[int, str]:
    """(layer number, layer name) of a module; the package itself is the front door."""
    if module == "pacplan":
        return 7, "front door"
    for number, name, prefixes in LAYERS:
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return number, name
    raise KeyError(module)


def modules(src: Path = SRC) -> dict[str, Path]:
    """{dotted name: file} of every module under src/pacplan."""
    out = {}
    for path in sorted((src / "pacplan").rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The module `name` is, or the nearest package holding it (`pacplan.x.f` -> `pacplan.x`)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


IMPORT_PATH = re.compile(r"pacplan(\.[A-Za-z_]\w*)+(:[A-Za-z_]\w*)?")
"""A string that is an import path: "pacplan.module" or "pacplan.module:attribute"."""
STILL_UPWARD: set[tuple[str, str]] = set()
"""Import-path ties that still point up, each a debt (none left: the `run` package, which
doubled as the front door's `pacplan.run` function, is now `pacplan.pipeline`)."""


def import_edges(known: dict[str, Path]) -> dict[str, dict[str, int]]:
    """{importer: {imported module: line}} over every import statement, function-level ones
    included, and every string that is an import path; `from pkg import name` counts the
    submodule `pkg.name` when there is one."""
    edges: dict[str, dict[str, int]] = {}
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found: dict[str, int] = {}
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str] = []
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and IMPORT_PATH.fullmatch(node.value)):
                targets = [node.value.partition(":")[0]]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from .x import y
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                           for a in node.names]
            for target in targets:
                if not (target == "pacplan" or target.startswith("pacplan.")):
                    continue
                resolved = _resolve(target, known)
                if resolved and resolved not in (module, "pacplan"):
                    found.setdefault(resolved, node.lineno)
        edges[module] = found
    return edges


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(edges.get(root, {})))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges.get(child, {}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def upward(edges: dict[str, dict[str, int]], known: dict[str, Path],
           root: Path = SRC.parent) -> list[str]:
    """Every import from a lower layer into a higher one: 'file:line: a (layer) imports b
    (layer), a higher layer', the file relative to `root`."""
    bad = []
    for module, targets in edges.items():
        mine = layer_of(module)
        for target, line in targets.items():
            theirs = layer_of(target)
            if theirs[0] > mine[0] and (module, target) not in STILL_UPWARD:
                where = known[module].relative_to(root)
                bad.append(f"{where}:{line}: {module} ({mine[1]}) imports {target} "
                           f"({theirs[1]}), a higher layer")
    return bad


@pytest.fixture(scope="module")
def graph() -> tuple[dict[str, Path], dict[str, dict[str, int]]]:
    known = modules()
    return known, import_edges(known)


def test_every_module_has_a_layer(graph):
    known, _ = graph
    unplaced = []
    for m in known:
        try:
            layer_of(m)
        except KeyError:
            unplaced.append(m)
    assert not unplaced, f"place these in the layer table (and docs/design.md §2.2): {unplaced}"


def test_no_import_cycle(graph):
    _, edges = graph
    found = cycles(edges)
    assert not found, "modules that import each other (directly or round a loop): " + "; ".join(
        " <-> ".join(c) for c in found)


def test_no_upward_import(graph):
    known, edges = graph
    bad = upward(edges, known)
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def test_no_module_over_400_lines():
    """A module a reader takes in at once (issue 39): split by concern past 400 lines."""
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, f"modules over 400 lines: {long}"


def test_the_checks_catch_a_cycle_and_an_upward_import(tmp_path):
    """The checks themselves: a made-up package with a two-module loop and a basics module
    importing the command line is refused, each offending edge named."""
    pkg = tmp_path / "pacplan"
    (pkg / "pipeline").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text("def f():\n    from pacplan.cli import app\n")
    (pkg / "choices.py").write_text('TARGET = "pacplan.cli:app"\n')
    (pkg / "cli.py").write_text("app = 1\n")
    (pkg / "pipeline" / "__init__.py").write_text("")
    (pkg / "pipeline" / "a.py").write_text("from pacplan.pipeline import b\n")
    (pkg / "pipeline" / "b.py").write_text("from . import a\n")
    known = modules(tmp_path)
    edges = import_edges(known)
    assert cycles(edges) == [["pacplan.pipeline.a", "pacplan.pipeline.b"]]
    assert sorted(upward(edges, known, tmp_path)) == [
        "pacplan/choices.py:1: pacplan.choices (basics) imports pacplan.cli (cli), a higher "
        "layer",
        "pacplan/errors.py:2: pacplan.errors (basics) imports pacplan.cli (cli), a higher layer"]
