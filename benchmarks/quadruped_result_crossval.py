"""A certified quadruped result replayed in the other engine; prints ONE JSON object.

    nice python benchmarks/quadruped_result_crossval.py RUN_DIR [--terrains 200] [--engine bullet]
        [--save]

Why: a quadruped certificate computed in MuJoCo is a statement about MuJoCo. Here the posterior's
support is replayed in PyBullet (the paper's engine) on the run's first `--terrains` test
terrains, one draw from the posterior per terrain (numpy seed 0), and compared with the run's own
MuJoCo test cost and its 99 % interval. The MuJoCo cost of the *same* draw on the *same* terrain
is read from the run's stored test matrix (checked against the certificate's sha256), so the
engine difference is also given paired, with a normal 99 % interval of its mean. Met when the
replayed mean lies inside the MuJoCo test cost's interval. `--save` also writes the JSON to
RUN_DIR/crossval/<engine>.json, which `pacplan report RUN_DIR` then quotes (its section "The
certificate in another engine") while its posterior and test matrix are the certificate's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from pacplan.io.files import atomic_write_json
from pacplan.pacbayes.matrices import matrix_from_bytes
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.rundir import RunDir, checked_policies
from quadruped_prior_eval import fly_diagonal

Z99 = 2.5758293035489004  # standard normal 0.995 quantile


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--terrains", type=int, default=200)
    ap.add_argument("--engine", default="bullet", choices=["bullet", "mujoco"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--save", action="store_true",
                    help="also write RUN_DIR/crossval/<engine>.json for the run's report")
    args = ap.parse_args(argv)
    run = Path(args.run_dir)
    cert = json.loads((run / "certificate.json").read_text())
    data = (run / cert["test_matrix"]["path"]).read_bytes()
    if hashlib.sha256(data).hexdigest() != cert["test_matrix"]["sha256"]:
        raise SystemExit(f"{run / cert['test_matrix']['path']}: sha256 differs from the "
                         "certificate's; run `pacplan verify` first")
    test = matrix_from_bytes(data, "test matrix")
    thetas = checked_policies(run).astype(np.float64)
    p = np.asarray(cert["p"], dtype=np.float64)
    world = cert["provenance"]["world"]
    first_test = int(cert["provenance"]["seeds"]["test"][0])
    k = min(args.terrains, test.shape[0])
    seeds = np.arange(first_test, first_test + k, dtype=np.int64)
    pick = np.random.default_rng(0).choice(len(p), size=k, p=p / p.sum())
    options = dict(world["options"]) | {"physics": args.engine}
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        replay = fly_diagonal(options, thetas[pick], seeds, pool, args.workers)
    # a screened certificate's test matrix holds its columns only: policy pick[i]'s column
    column = np.arange(len(p)) if cert.get("columns") is None else np.full(len(p), -1)
    if cert.get("columns") is not None:
        column[cert["columns"]] = np.arange(len(cert["columns"]))
    stored = test[np.arange(k), column[pick]]
    diff = replay - stored
    lo, hi = cert["test_ci"]
    half = Z99 * diff.std(ddof=1) / np.sqrt(k) if k > 1 else float("nan")
    result = {
        "benchmark": "quadruped_result_crossval",
        "run": str(run), "engine": args.engine, "run_engine": world["options"].get("physics",
                                                                                   "bullet"),
        "terrains": [int(seeds[0]), int(seeds[-1]) + 1], "draws": "one per terrain from p, "
        "numpy default_rng(0)",
        "replayed_mean_cost": round(float(replay.mean()), 4),
        "stored_same_draws_mean_cost": round(float(stored.mean()), 4),
        "paired_diff": round(float(diff.mean()), 4),
        "paired_diff_ci99": [round(float(diff.mean() - half), 4),
                             round(float(diff.mean() + half), 4)],
        "run_test_cost": round(float(cert["test_cost"]), 4),
        "run_test_ci99": [round(float(lo), 4), round(float(hi), 4)],
        "within_test_ci": bool(lo <= replay.mean() <= hi),
        "certificate_n": int(cert["n"]),
        "posterior_sha256": Certificate.load(run / "certificate.json").posterior_sha256(),
        "test_matrix_sha256": cert["test_matrix"]["sha256"],
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(result))
    if args.save:
        (run / RunDir.CROSSVAL).mkdir(exist_ok=True)
        atomic_write_json(run / RunDir.CROSSVAL / f"{args.engine}.json", result)


if __name__ == "__main__":
    main()
