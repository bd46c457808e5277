"""How a config travels through pacplan: run `pacplan run CONFIG` under `sys.setprofile` and
count the walk between pacplan's modules.

The walk is the sequence of pacplan modules control is in, one entry each time it changes (a
call into another module's function, or a return to the caller's module; frames of other
libraries are transparent). From it:

- modules: distinct pacplan modules the run executes code of;
- returns: changes of module into one control had already left earlier. Loops repeat the same
  changes thousands of times, so they are counted as distinct (from, to) pairs; the raw count
  of such changes is printed beside them;
- climbing: those returns whose destination is in a higher layer than where they come from
  (a stage calling down into a check and coming back up, again and again);
- to checks: returns into validation or file modules (pacplan.validation, pacplan.io.* and
  the modules they were before the io/ package: files, yamlio, weights, outputs);
- check calls: calls into those modules from another module, all of them and those made by
  the run's own stages (pacplan.pipeline.*, pacplan.run.* before), and how many distinct
  places in pipeline/ make them
  (calling function, function called).

Layers, low to high, by module name (the old names too, so an older checkout is measured
alike): basics (errors, choices, validation, portable, extras) < io < config, presets <
pacbayes, es, worlds < pipeline (run) < report < export, policy_certification
(certify_policy) < api < cli.

    python scripts/config_walk.py toy            # this checkout
    PYTHONPATH=/other/checkout/src python scripts/config_walk.py toy   # another one

It writes its run directory to a temporary folder and removes it.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import itertools
import json
import sys
import tempfile
from pathlib import Path

_IO_OLD = ("pacplan.files", "pacplan.yamlio", "pacplan.weights", "pacplan.outputs",
           "pacplan.paperdata", "pacplan.plotting")
_REPORT_OLD = ("pacplan.run.report", "pacplan.run.figures", "pacplan.run.markdown")
_BASICS = ("pacplan.errors", "pacplan.choices", "pacplan.validation", "pacplan.portable",
           "pacplan.extras", "pacplan.callable_package")


def layer(module: str) -> int:
    """The layer of a pacplan module (0 lowest); the old module names map where they moved."""
    def under(*prefixes: str) -> bool:
        return any(module == p or module.startswith(p + ".") or module.startswith(p + "_")
                   for p in prefixes)
    if under(*_BASICS):
        return 0
    if under("pacplan.io", *_IO_OLD):
        return 1
    if under("pacplan.config", "pacplan.presets"):
        return 2
    if under("pacplan.pacbayes", "pacplan.es", "pacplan.worlds",
             "pacplan.runtime"):
        return 3
    if under("pacplan.report", *_REPORT_OLD):
        return 5
    if under("pacplan.pipeline", "pacplan.run"):  # pacplan.run: its name until 0.2
        return 4
    if under("pacplan.export", "pacplan.policy_certification", "pacplan.certify_policy"):
        return 6
    if module in ("pacplan", "pacplan.api"):
        return 7
    if under("pacplan.cli", "pacplan.__main__"):
        return 8
    raise ValueError(f"no layer for {module}")


def is_check(module: str) -> bool:
    return module == "pacplan.validation" or module.startswith("pacplan.io.") or module in (
        "pacplan.files", "pacplan.yamlio", "pacplan.weights", "pacplan.outputs")


def walk(argv: list[str], checks: list[tuple[str, str, str]]) -> list[str]:
    """The module walk of `pacplan *argv` (SystemExit of a successful run is swallowed); every
    call into a validation or file module from another module is appended to `checks` as
    (calling module, calling function, module.function called)."""
    from pacplan.cli import main

    seq: list[str] = []

    def module_of(frame) -> str | None:
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if name == "pacplan" or name.startswith("pacplan."):
                return name
            frame = frame.f_back
        return None

    def profile(frame, event, arg) -> None:
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if not (name == "pacplan" or name.startswith("pacplan.")):
                return
            if is_check(name):
                caller = frame.f_back
                while caller is not None and caller.f_globals.get("__name__", "") == name:
                    caller = caller.f_back
                if caller is not None:
                    checks.append((module_of(caller) or "", caller.f_code.co_name,
                                   f"{name}.{frame.f_code.co_name}"))
        elif event == "return":
            name = frame.f_globals.get("__name__", "")
            if not (name == "pacplan" or name.startswith("pacplan.")):
                return
            name = module_of(frame.f_back)
            if name is None:
                return
        else:
            return
        if not seq or seq[-1] != name:
            seq.append(name)

    sys.argv = ["pacplan", *argv]
    sys.setprofile(profile)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the run's own table
            main()
    except SystemExit as exc:
        if exc.code:
            raise
    finally:
        sys.setprofile(None)
    return seq


def measure(seq: list[str], checks: list[tuple[str, str, str]]) -> dict:
    left: set[str] = set()
    returns: collections.Counter[tuple[str, str]] = collections.Counter()
    for a, b in itertools.pairwise(seq):
        left.add(a)
        if b in left:
            returns[(a, b)] += 1
    climbing = [e for e in returns if layer(e[1]) > layer(e[0])]
    to_checks = [e for e in returns if is_check(e[1])]
    from_run = [c for c in checks if c[0] and layer(c[0]) == 4]
    return {"modules": len(set(seq)), "transitions": len(seq) - 1,
            "returns": len(returns), "returns_raw": sum(returns.values()),
            "climbing": len(climbing), "to_checks": len(to_checks),
            "check_calls": len(checks), "check_calls_from_run": len(from_run),
            "check_sites_in_run": len(set(from_run)),
            "to_checks_from": sorted({a for a, _ in to_checks}),
            "climbing_edges": sorted(f"{a} -> {b}" for a, b in climbing)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", nargs="?", default="toy")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--edges", action="store_true",
                        help="also list the modules returning to checks and the climbing returns")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        checks: list[tuple[str, str, str]] = []
        seq = walk(["run", args.config, "--out", str(Path(tmp) / "run"), "--quiet"], checks)
    import pacplan

    result = {"pacplan": str(Path(pacplan.__file__).parent), "config": args.config,
              **measure(seq, checks)}
    if not args.edges:
        del result["to_checks_from"], result["climbing_edges"]
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            if isinstance(value, list):
                print(f"{key:>15}:", *value, sep="\n  ")
            else:
                print(f"{key:>15}: {value}")


if __name__ == "__main__":
    main()
