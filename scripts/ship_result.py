"""Ship a finished run as a result: a folder a clone made elsewhere can verify, report and resume.

    python scripts/ship_result.py RUN_DIR DEST_DIR [--own-prior]

Why: `pacplan run` freezes the input files it read (the prior, an ES start, a baseline's
weights) in config.yaml as absolute paths of the machine that ran it, which name nothing in a
clone. A shipped result (`results/<name>`) names them relative to its own folder instead. This
copies the run to DEST_DIR without its lock and its chunk folders (every finished matrix is in
`costs/` and in manifest.json), rewrites those paths relative to DEST_DIR, and verifies every
certificate in the copy. With `--own-prior` the config names the run's own copy of its prior
(`prior.safetensors`): for a prior the repository ships nowhere else, as the paper's
published Minitaur prior.

It refuses, writing nothing, unless the run has finished (its certificate.json is there), no
other process holds it (its lock), DEST_DIR does not exist yet, and each file the config names
is still where it says; a copy whose certificates do not verify is removed. Prints the
rewritten paths as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from pacplan.config import RunConfig, dump_config, load_config
from pacplan.errors import PacplanError
from pacplan.pipeline.provenance import verify_certificate
from pacplan.pipeline.rundir import RunDir


def ship(run_dir: Path, dest: Path, own_prior: bool = False) -> dict[str, str]:
    """Copy `run_dir` to `dest` as a shipped result; returns {field: the path it now names}."""
    rd = RunDir(run_dir)
    if not (rd / RunDir.CERTIFICATE).is_file():
        raise PacplanError(f"{run_dir} has no {RunDir.CERTIFICATE}: finish it with `pacplan "
                           "run` first")
    if dest.exists():
        raise PacplanError(f"{dest} already exists; ship to a new folder")
    with rd.locked():
        cfg = load_config(rd / RunDir.CONFIG)  # relative paths read from the run's folder
        if own_prior:
            cfg.prior = str((rd / RunDir.PRIOR).resolve())
        named: dict[str, str] = {}
        for section, name in cfg.input_files():
            path = Path(getattr(section, name))
            if not path.is_file():
                raise PacplanError(f"{rd / RunDir.CONFIG} names {name}: {path}, which is not "
                                   "there; put it back before shipping")
            relative = (RunDir.PRIOR if own_prior and section is cfg and name == "prior"
                        else os.path.relpath(path.resolve(), dest.resolve()))
            setattr(section, name, relative)
            named[_field(cfg, section, name)] = relative
        shutil.copytree(rd.path, dest, ignore=_not_shipped)
    try:
        dump_config(cfg, dest / RunDir.CONFIG)
        for path in [*sorted((dest / "certificates").glob("N*.json")),
                     dest / RunDir.CERTIFICATE]:
            verify_certificate(path)
    except BaseException:  # a copy that does not verify is not left looking shipped
        shutil.rmtree(dest)
        raise
    return named


def _field(cfg: RunConfig, section: object, name: str) -> str:
    """A config field's name as the YAML spells it: prior, es.init_mean, baselines[1].weights."""
    if section is cfg:
        return name
    if section is cfg.es:
        return f"es.{name}"
    return f"baselines[{next(i for i, b in enumerate(cfg.baselines) if b is section)}].{name}"


def _not_shipped(folder: str, names: list[str]) -> list[str]:
    """The lock and the chunk folders: a finished run's matrices are whole in costs/."""
    return [n for n in names if n == RunDir.LOCK or n.endswith(".chunks")]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("dest_dir", type=Path)
    ap.add_argument("--own-prior", action="store_true",
                    help="name the run's own prior.safetensors, not the file it was given")
    args = ap.parse_args(argv)
    try:
        named = ship(args.run_dir, args.dest_dir, own_prior=args.own_prior)
    except PacplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(named))
    return 0


if __name__ == "__main__":
    sys.exit(main())
