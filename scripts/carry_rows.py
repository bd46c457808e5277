"""Carry finished work from one run into another run that would compute the same things.

    python scripts/carry_rows.py SOURCE_RUN DEST_RUN [--baselines]

Why: the paper's sizes take many hours, so they are computed in stages that share their work.
A stage run (`quadruped-paper-n1000`: the first 1000 certification rows and the test matrix of
`quadruped-paper`) gives a finished certificate early, and its rows then count towards the big
run; the big run's rows, finished or still in its chunk folder, can in turn finish a larger
stage (`quadruped-paper-n2000`) while the big run goes on. This moves, without computing
anything:
- the source's certification rows: its finished matrix, or else the rows from the first on that
  its chunk folder holds whole (every policy). They become finished chunks of the destination's
  `costs/cert.chunks/`: each chunk of the destination's grid that lies wholly within them. A
  chunk the destination already has must be byte-identical, or this stops. A destination
  whose certification matrix is finished takes no rows (the rows both hold must agree);
- the source's finished test and baseline matrices, with their manifest entries, when the
  destination has none yet. Runs that screen (`certificate.screen`) must screen alike; a
  screened run's rows beyond its screening rows (`costs/cert-rest`) stay its own.

With `--baselines`, only the source's finished baseline matrices are copied, into a run that
may have another prior (its own policies): a baseline's costs do not depend on them, so the
paper's prior certified beside pacplan's need not fly the teacher again.

It refuses unless both runs drew the same policies (sha256), in the same world, with the same
first certification seed, test seeds, baselines, storage and chunk grid, and unless the
destination was started (its policies drawn: run `pacplan run` on it and stop it). Both run
directories are locked while it works, so carry from a copy of a run that is still computing.
The destination then resumes with `pacplan run` and says how many chunks it kept; what it
computes is what an uninterrupted run computes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

from pacplan.config import config_to_dict, load_config
from pacplan.errors import PacplanError
from pacplan.io.files import npy_bytes
from pacplan.pipeline.execution.chunks import ChunkStore
from pacplan.pipeline.execution.executors import chunk_grid
from pacplan.pipeline.pipeline import cost_inputs
from pacplan.pipeline.rows import cert_role_rows, leading_cert_rows
from pacplan.pipeline.rundir import Manifest, RunDir

SAME_IN_BOTH = ("world", "storage", "baselines")
# a screened run's own matrices: its kept columns over its own rows, never another run's
SCREENED = ("cert-screened", "cert-rest")


def carry(source_dir: Path, dest_dir: Path, baselines_only: bool = False
          ) -> dict[str, int | list[str]]:
    """Move the source's finished work into the destination; returns what was kept and added.
    Nothing is written anywhere until every check has passed: a mistyped path is refused
    before the lock would create it (with its run.lock), and a refusal found under the lock
    (a chunk that differs, a damaged matrix) leaves the destination as it was."""
    source, dest = RunDir(source_dir), RunDir(dest_dir)
    for rd, role in ((source, "source"), (dest, "destination")):
        if not (rd / RunDir.CONFIG).is_file():
            what = "no such directory" if not rd.path.is_dir() else f"no {RunDir.CONFIG}"
            raise PacplanError(f"{rd.path}: the {role} is not a run directory ({what}); "
                               "nothing was written")
    with source.locked(), dest.locked():
        return _carry_baselines(source, dest) if baselines_only else _carry(source, dest)


def _which(a: object, b: object) -> str:
    """For two worlds: the name or the options that differ (a variant or an engine, say), so
    rows of the MuJoCo twin are never mistaken for PyBullet's."""
    if not (isinstance(a, dict) and isinstance(b, dict) and "options" in a and "options" in b):
        return ""
    if a.get("name") != b.get("name"):
        return f" (world {a.get('name')!r} and {b.get('name')!r})"
    oa, ob = a["options"] or {}, b["options"] or {}
    keys = sorted(k for k in set(oa) | set(ob) if oa.get(k) != ob.get(k))
    return " (" + ", ".join(f"{k}: {oa.get(k)!r} and {ob.get(k)!r}" for k in keys) + ")"


def _same_baselines(cfg_s: dict, cfg_d: dict) -> None:
    """What a baseline matrix is made from, alike in both runs (their policies aside)."""
    for key in SAME_IN_BOTH:
        if cfg_s[key] != cfg_d[key]:
            raise PacplanError(f"the runs differ in `{key}`{_which(cfg_s[key], cfg_d[key])}; "
                               "nothing the source computed is what the destination computes")
    grid_s, grid_d = ({k: c["executor"][k] for k in ("chunk_seeds", "chunk_policies")}
                      for c in (cfg_s, cfg_d))
    if grid_s != grid_d:  # a world may batch the rollouts of a chunk (results follow the grid)
        raise PacplanError(f"the runs' chunk grids differ ({grid_s} and {grid_d}): a world may "
                           "compute a chunk's rollouts as one batch, so the same cost may differ "
                           "in its last bits between them")
    if cfg_s["seeds"]["test"] != cfg_d["seeds"]["test"]:
        raise PacplanError("the runs have different test seeds")


def _carry_baselines(source: RunDir, dest: RunDir) -> dict[str, int | list[str]]:
    """The source's finished baseline matrices into a run of another prior (or policies): a
    baseline's costs do not depend on them, so the paper's prior's run need not fly the
    teacher again. Each is copied with its manifest entry; the destination's own run then
    checks its inputs (world, options, weights, seeds) as for any matrix it finds."""
    cfg_s, cfg_d = (config_to_dict(load_config(r / RunDir.CONFIG)) for r in (source, dest))
    _same_baselines(cfg_s, cfg_d)
    ms, md = Manifest(source.path), Manifest(dest.path)
    names = [RunDir.costs(f"baseline-{b['name']}", cfg_s["storage"]["cost_denominator"]
                          is not None) for b in cfg_s["baselines"]]
    todo = [n for n in names if n not in md.entries and ms.read_finished(n) is not None]
    if not todo:
        raise PacplanError(f"{source.path} has no finished baseline matrix that {dest.path} "
                           "lacks")
    (dest / "costs").mkdir(exist_ok=True)
    for name in todo:
        shutil.copyfile(source / name, dest / name)
        if md.record(name, **ms.inputs(name)) != ms.sha(name):
            raise PacplanError(f"{dest / name} changed while it was copied")
    return {"copied": todo}


def _same_leading_rows(dest: RunDir, cert: np.ndarray) -> None:
    """A destination that finished its certification matrix must agree with the source's
    rows on the rows both hold."""
    have = leading_cert_rows(dest)
    common = min(have.shape[0], cert.shape[0])
    if npy_bytes(have[:common]) != npy_bytes(cert[:common]):
        raise PacplanError(f"{dest.path} has finished its certification matrix and its rows "
                           "differ from the source's: the runs did not compute the same thing")


def _chunks_to_carry(dest: RunDir, inputs: dict, cert: np.ndarray, n_dest: int, ex: dict
                     ) -> tuple[ChunkStore | None, int, list[tuple[tuple[int, int], np.ndarray]]]:
    """The destination's chunk store (if any), how many of the chunks that lie wholly within
    the source's rows it has already (each byte-identical, or this stops) and the others."""
    existing = ChunkStore(dest.chunks("cert"), inputs) if dest.chunks("cert").is_dir() else None
    kept, new = 0, []
    for rows, cols in chunk_grid(n_dest, cert.shape[1], ex["chunk_seeds"], ex["chunk_policies"]):
        if rows.stop > cert.shape[0]:
            continue
        key, block = (rows.start, cols.start), cert[rows, cols]
        name = ChunkStore.chunk_name(key)
        have = None if existing is None else existing.files.read(name)  # checked, or None
        if have is None:
            new.append((key, block))
        elif have != npy_bytes(block):
            raise PacplanError(f"chunk {name} of {dest.path} differs from the source's "
                               "rows: the runs did not compute the same thing")
        else:
            kept += 1
    return existing, kept, new


def _carry(source: RunDir, dest: RunDir) -> dict[str, int | list[str]]:
    cfg_s, cfg_d = (config_to_dict(load_config(r / RunDir.CONFIG)) for r in (source, dest))
    _same_baselines(cfg_s, cfg_d)
    if cfg_d["storage"]["cost_denominator"] is not None:
        raise PacplanError("runs with storage.cost_denominator store decoded rational costs, "
                           "not the chunks' own values: not supported")
    screens = [c["certificate"].get("screen") for c in (cfg_s, cfg_d)]
    if screens[0] != screens[1]:  # the kept columns, so the test matrix, would differ
        raise PacplanError(f"the runs screen differently ({screens[0]} and {screens[1]}): "
                           "their test matrices hold other policies")
    s0, d0 = cfg_s["seeds"]["cert"][0], cfg_d["seeds"]["cert"][0]
    if s0 != d0:
        raise PacplanError(f"the runs' certification rows start at different seeds ({s0} and "
                           f"{d0}): neither is a prefix of the other")
    ms, md = Manifest(source.path), Manifest(dest.path)
    sha = ms.sha(RunDir.POLICIES)
    if sha is None or sha != md.sha(RunDir.POLICIES):
        raise PacplanError("the runs' policies.npy differ (or one has none): start the "
                           "destination with `pacplan run` first, so that it draws its policies")
    cert = leading_cert_rows(source)
    n_dest = cert_role_rows(cfg_d)
    inputs = cost_inputs(sha, cfg_d["world"], np.arange(d0, d0 + n_dest))
    stamp_path = dest.chunks("cert") / ChunkStore.STAMP
    if stamp_path.is_file() and ChunkStore.stamped_inputs(stamp_path.parent) != inputs:
        raise PacplanError(f"{stamp_path} is stamped with other inputs than this run's (or "
                           "is damaged)")
    finished = md.sha(RunDir.costs("cert")) is not None
    # every check first (the destination's chunks, the source's matrices), then every write
    if finished:  # it takes no rows, only matrices
        _same_leading_rows(dest, cert)
        existing, kept, new = None, 0, []
    else:
        existing, kept, new = _chunks_to_carry(dest, inputs, cert, n_dest, cfg_d["executor"])
    matrices = [name for name in sorted(ms.entries)
                if name.startswith("costs/") and name != RunDir.costs("cert")
                and Path(name).stem not in SCREENED
                and name not in md.entries and ms.read_finished(name) is not None]
    if finished and not matrices:
        raise PacplanError(f"{dest.path} has finished its certification matrix already and "
                           "holds every finished matrix of the source: nothing to carry")
    if not finished:
        store = existing or ChunkStore(dest.chunks("cert"), inputs)
        for key, block in new:
            store.save(key, block)
    copied = []
    for name in matrices:
        shutil.copyfile(source / name, dest / name)
        if md.record(name, **ms.inputs(name)) != ms.sha(name):  # the copy is what was checked
            raise PacplanError(f"{dest / name} changed while it was copied")
        copied.append(name)
    return {"rows": int(cert.shape[0]), "chunks_kept": kept, "chunks_added": len(new),
            "copied": copied}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source_run", type=Path)
    ap.add_argument("dest_run", type=Path)
    ap.add_argument("--baselines", action="store_true",
                    help="copy only the finished baseline matrices, into a run of another prior")
    args = ap.parse_args(argv)
    try:
        result = carry(args.source_run, args.dest_run, baselines_only=args.baselines)
    except PacplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
