"""Carry a finished smaller run (a stage) into a bigger run that would compute the same things.

    python scripts/carry_stage_into_run.py STAGE_RUN BIG_RUN

Why: the paper's sizes take many hours. A stage run (say `quadruped-paper-n1000`: the first 1000
certification rows and the test matrix of `quadruped-paper`) gives a finished certificate early;
this moves what it computed into the big run, so that nothing is computed twice:
- its certification rows become finished chunks of the big run's `costs/cert.chunks/` (each
  chunk of the big run's grid that lies wholly within the stage's rows; a chunk the big run
  already has must be byte-identical, or this stops);
- its test and baseline matrices, with their manifest entries, are copied when the big run has
  none yet.

It refuses unless both runs drew the same policies (sha256), in the same world, with the
stage's certification seeds a prefix of the big run's and the same test seeds, baselines and
storage, and unless the big run was started (its policies drawn, `costs/cert.chunks/` stamped).
Both run directories are locked while it works. The big run then resumes with `pacplan run`
and says how many chunks it kept; what it computes is what an uninterrupted run computes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from pacplan.config import config_to_dict, load_config
from pacplan.errors import PacplanError
from pacplan.files import npy_bytes
from pacplan.pacbayes.matrices import matrix_from_bytes
from pacplan.run.chunks import ChunkStore
from pacplan.run.executors import chunk_grid
from pacplan.run.rundir import Manifest, RunDir

SAME_IN_BOTH = ("world", "storage", "baselines")


def carry(stage_dir: Path, big_dir: Path) -> dict[str, int | list[str]]:
    """Move the stage's finished work into the big run; returns what was kept and added."""
    stage, big = RunDir(stage_dir), RunDir(big_dir)
    with stage.locked(), big.locked():
        return _carry(stage, big)


def _carry(stage: RunDir, big: RunDir) -> dict[str, int | list[str]]:
    cfg_s, cfg_b = (config_to_dict(load_config(r / RunDir.CONFIG)) for r in (stage, big))
    for key in SAME_IN_BOTH:
        if cfg_s[key] != cfg_b[key]:
            raise PacplanError(f"the runs differ in `{key}`; nothing the stage computed is "
                               "what the big run computes")
    if cfg_b["storage"]["cost_denominator"] is not None:
        raise PacplanError("runs with storage.cost_denominator store decoded rational costs, "
                           "not the chunks' own values: not supported")
    if cfg_s["seeds"]["test"] != cfg_b["seeds"]["test"]:
        raise PacplanError("the runs have different test seeds")
    s0, b0 = cfg_s["seeds"]["cert"][0], cfg_b["seeds"]["cert"][0]
    n_stage = max(cfg_s["certificate"]["n"] or [1])
    n_big = max(cfg_b["certificate"]["n"] or [1])
    if s0 != b0 or n_stage > n_big:
        raise PacplanError(f"the stage's certification rows (seeds from {s0}, {n_stage} rows) "
                           f"are not a prefix of the big run's (from {b0}, {n_big} rows)")
    ms, mb = Manifest(stage.path), Manifest(big.path)
    sha = ms.sha(RunDir.POLICIES)
    if sha is None or sha != mb.sha(RunDir.POLICIES):
        raise PacplanError("the runs' policies.npy differ (or one has none): start the big run "
                           "with `pacplan run` first, so that it draws its policies")
    cert_name = RunDir.costs("cert")
    data = ms.read_finished(cert_name)
    if data is None:
        raise PacplanError(f"{stage.path} has no finished {cert_name}; finish it first")
    cert = matrix_from_bytes(data, f"{cert_name} in {stage.path}")[:n_stage]
    stamp_path = big.chunks("cert") / ChunkStore.STAMP
    if not stamp_path.is_file():
        raise PacplanError(f"{big.path} has no {stamp_path.relative_to(big.path)}: start it "
                           "with `pacplan run` and stop it once it computes cert costs")
    inputs = json.loads(stamp_path.read_text())["inputs"]
    if inputs != {"policies": sha, "world": cfg_b["world"], "seeds": [b0, b0 + n_big]}:
        raise PacplanError(f"{stamp_path} is stamped with other inputs than this big run's")
    store = ChunkStore(big.chunks("cert"), inputs)
    ex = cfg_b["executor"]
    grid = chunk_grid(n_big, cert.shape[1], ex["chunk_seeds"], ex["chunk_policies"])
    kept = added = 0
    for rows, cols in grid:
        if rows.stop > n_stage:
            continue
        key, block = (rows.start, cols.start), cert[rows, cols]
        name = ChunkStore.chunk_name(key)
        if name in store.ledger:
            if (store.folder / name).read_bytes() != npy_bytes(block):
                raise PacplanError(f"chunk {name} of {big.path} differs from the stage's rows: "
                                   "the runs did not compute the same thing")
            kept += 1
        else:
            store.save(key, block)
            added += 1
    copied = []
    for name in sorted(ms.entries):
        if not name.startswith("costs/") or name == cert_name or name in mb.entries:
            continue
        if ms.read_finished(name) is None:
            continue
        shutil.copyfile(stage / name, big / name)
        if mb.record(name, **ms.inputs(name)) != ms.sha(name):  # the copy is what was checked
            raise PacplanError(f"{big / name} changed while it was copied")
        copied.append(name)
    return {"chunks_kept": kept, "chunks_added": added, "copied": copied}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stage_run", type=Path)
    ap.add_argument("big_run", type=Path)
    args = ap.parse_args(argv)
    try:
        result = carry(args.stage_run, args.big_run)
    except PacplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
