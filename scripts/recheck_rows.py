"""Recompute a sample of a run's certification rows on this machine; compare them bit for bit.

    python scripts/recheck_rows.py RUN_DIR [--rows 4] [--seed 0] [--workers 2]

Why: a cost matrix is trusted by its sha256, which proves the file is the one that was computed,
not that this machine computes the same numbers. A long run resumed on another machine mixes
rows from both, so check first: MuJoCo and PyBullet promise bit identity on one build and CPU,
not across CPU models. Rows are drawn (numpy `default_rng(seed)`) from the run's finished
leading rows (its matrix, or its chunk folder while it still computes), recomputed with the
run's own world, policies and seeds, and compared exactly. Prints ONE JSON object; exit 1 when a
value differs.

A difference is only a machine's if the inputs are the ones the rows were computed from, so
they are checked first, by hash: policies.npy against its manifest sha256 and the sha256 the
rows were recorded with (the matrix's manifest entry, or the chunk folder's inputs.json), and
config.yaml's world and certification seeds against those recorded there. A replaced
policies.npy or an edited config is refused (exit 2), naming the input that changed.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import numpy as np

from pacplan.config import RunConfig, config_to_dict, load_config
from pacplan.errors import PacplanError
from pacplan.io.files import npy_from_bytes, sha256_bytes
from pacplan.pipeline.execution.chunks import ChunkStore
from pacplan.pipeline.execution.executors import make_executor
from pacplan.pipeline.rows import leading_cert_rows
from pacplan.pipeline.rundir import Manifest, RunDir, identity
from pacplan.pipeline.stages import world_spec


def recheck(run_dir: Path, rows: int, seed: int, workers: int) -> dict[str, object]:
    """Recompute `rows` sampled certification rows of the run; what differed, if anything."""
    rd = RunDir(run_dir)
    cfg = load_config(rd / RunDir.CONFIG)
    thetas = checked_inputs(rd, cfg)
    stored = leading_cert_rows(rd)
    pick = np.sort(np.random.default_rng(seed).choice(stored.shape[0], size=min(rows,
                   stored.shape[0]), replace=False))
    seeds = cfg.seeds.cert[0] + pick.astype(np.int64)
    executor = make_executor("serial" if workers <= 1 else "processes", max(1, workers), None,
                             cfg.executor.chunk_policies, 1)
    t0 = time.perf_counter()
    again = np.empty((len(seeds), thetas.shape[0]))
    try:
        for chunk in executor.iter_chunks(world_spec(cfg), thetas, seeds):
            again[chunk.seeds, chunk.thetas] = chunk.block
    finally:
        executor.close()
    differs = np.argwhere(again != stored[pick])
    return {
        "script": "recheck_rows", "run": str(rd.path), "cpu": _cpu_model(),
        "rows_available": int(stored.shape[0]),
        "rows_checked": [int(r) for r in pick], "values_checked": int(again.size),
        "values_differing": len(differs),
        "first_difference": None if not len(differs) else {
            "row": int(pick[differs[0][0]]), "policy": int(differs[0][1]),
            "stored": float(stored[pick][tuple(differs[0])]),
            "recomputed": float(again[tuple(differs[0])])},
        "inputs_checked": ["policies.npy", "world", "certification seeds"],
        "bit_identical": not len(differs), "wall_s": round(time.perf_counter() - t0, 1),
    }


def checked_inputs(rd: RunDir, cfg: RunConfig) -> np.ndarray:
    """The run's policies, once they and the config are what its certification rows were
    computed from; else a refusal naming the input that changed (a recomputation from other
    inputs differs for that reason, not for the CPU's). A run with no recorded rows is left to
    `leading_cert_rows` to refuse."""
    manifest, name = Manifest(rd.path), RunDir.costs("cert")
    if manifest.sha(name) is not None:
        recorded, where = manifest.inputs(name), f"{RunDir.MANIFEST} (for {name})"
    else:
        recorded = ChunkStore.stamped_inputs(rd.chunks("cert"))
        where = (rd.chunks("cert") / ChunkStore.STAMP).relative_to(rd.path).as_posix()
    data = manifest.read_finished(RunDir.POLICIES)  # refuses a file that is not its record
    if data is None:
        raise PacplanError(f"{rd.path} has no finished {RunDir.POLICIES}")
    if recorded is None:
        return npy_from_bytes(data, f"{RunDir.POLICIES} in {rd.path}")
    sha = sha256_bytes(data)
    if recorded.get("policies") != sha:
        raise PacplanError(f"{RunDir.POLICIES} in {rd.path} is not the one its certification rows "
                           f"were computed from (sha256 {sha[:12]}…, {where} says "
                           f"{str(recorded.get('policies'))[:12]}…): an input changed, not the CPU")
    edited = f"({where}): {RunDir.CONFIG} was edited, not the CPU"
    world, was = config_to_dict(cfg)["world"], recorded.get("world")
    if identity(was) != identity(world):
        raise PacplanError(f"{rd.path} asks for world {json.dumps(world)}, but its certification "
                           f"rows were computed in {json.dumps(was)} {edited}")
    first = cfg.seeds.cert[0]
    seeds = [first, first + max(cfg.certificate.n or [1])]
    if recorded.get("seeds") != seeds:
        raise PacplanError(f"{rd.path} asks for certification seeds {seeds}, but its rows were "
                           f"computed for seeds {recorded.get('seeds')} {edited}")
    return npy_from_bytes(data, f"{RunDir.POLICIES} in {rd.path}")


def _cpu_model() -> str:
    """The CPU's model name (Linux), else the architecture: what bit identity depends on."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--rows", type=int, default=4, help="rows to recompute (default 4)")
    ap.add_argument("--seed", type=int, default=0, help="which rows: numpy seed (default 0)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    # numpy refuses a negative seed with a traceback; workers < 1 silently ran serially
    for option, value in (("--rows", args.rows), ("--workers", args.workers)):
        if value < 1:
            print(f"error: {option} must be at least 1, got {value}", file=sys.stderr)
            return 2
    if args.seed < 0:
        print(f"error: --seed must be a whole number ≥ 0, got {args.seed}", file=sys.stderr)
        return 2
    try:
        result = recheck(args.run_dir, args.rows, args.seed, args.workers)
    except PacplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0 if result["bit_identical"] else 1


if __name__ == "__main__":
    sys.exit(main())
