"""What screening costs a certificate, and what it saves; ONE JSON object.

    python benchmarks/screened_certificates.py [--rows 1000] [--keep 5 10 15 20] [--save]

Why: `certificate.screen` (docs/method.md) flies all m policies on the first R certification
environments and only the k of least cost there on the rest and on the test set. The bound
stays valid but can only grow; this measures by how much, against the unscreened certificate
on the same matrix (the baseline, in the same run), on real matrices where every cell is known:
the paper's published quadruped matrices (its 50 draws on 4000 + 5000 terrains; `pacplan data
paper`) and, when present, pacplan's own `results/quadruped` (50 policies, 4000 + 1000
terrains). Printed per matrix, N and k: the screened and unscreened certified bounds, their
difference, both posteriors' test costs, and the rollouts each needs (R·m + (N − R)·k
certification and T·k test, against N·m and T·m) with their ratio.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.io.paperdata import paper_data_dir
from pacplan.pacbayes.posterior import mixture_costs, optimize_gibbs, optimize_gibbs_columns
from pacplan.pipeline.stages import screen_columns

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "data" / "screened-certificates.json"
DELTA = 0.01


def _matrices() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    out = {}
    paper = paper_data_dir()
    if paper is not None and (paper / "C_minitaur.npy").is_file():
        out["paper C_minitaur (pybullet_envs, the paper's prior)"] = tuple(
            np.clip(np.load(paper / f, allow_pickle=False).astype(np.float64), 0.0, 1.0)
            for f in ("C_minitaur.npy", "C_minitaur_emp_test.npy"))
    run = REPO / "results" / "quadruped" / "costs"
    if (run / "cert.npy").is_file():
        out["results/quadruped (text world, MuJoCo)"] = tuple(
            np.load(run / f, allow_pickle=False) for f in ("cert.npy", "test.npy"))
    return out


def measure(cert: np.ndarray, test: np.ndarray, rows: int, keeps: list[int]) -> list[dict]:
    n_all, m = cert.shape
    out = []
    for n in sorted({rows, 2 * rows, n_all} & set(range(rows, n_all + 1))):
        plain = optimize_gibbs(cert[:n], DELTA, "best")
        plain_test = float(mixture_costs(test, plain.p).mean())
        for keep in keeps:
            columns = screen_columns(cert[:rows], keep)
            post = optimize_gibbs_columns(cert[:n, columns], m, DELTA, "best")
            rollouts = rows * m + (n - rows) * keep + len(test) * keep
            out.append({
                "n": n, "keep": keep, "certified": round(post.value, 6),
                "unscreened_certified": round(plain.value, 6),
                "difference": round(post.value - plain.value, 6),
                "test_cost": round(float(mixture_costs(test[:, columns], post.p).mean()), 6),
                "unscreened_test_cost": round(plain_test, 6),
                "rollouts": rollouts, "unscreened_rollouts": n * m + len(test) * m,
                "rollout_ratio": round(rollouts / (n * m + len(test) * m), 4)})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--keep", type=int, nargs="+", default=[5, 10, 15, 20])
    ap.add_argument("--save", action="store_true", help=f"also write {OUT.relative_to(REPO)}")
    args = ap.parse_args(argv)
    matrices = _matrices()
    if not matrices:
        print("error: no matrix found: run `pacplan data paper` first", file=sys.stderr)
        return 2
    result: dict[str, Any] = {"benchmark": "screened_certificates", "delta": DELTA,
                              "screen_rows": args.rows, "matrices": {}}
    for name, (cert, test) in matrices.items():
        result["matrices"][name] = {"shape": [list(cert.shape), list(test.shape)],
                                    "rows": measure(cert, test, args.rows, args.keep)}
    text = json.dumps(result, indent=1)
    print(text)
    if args.save:
        OUT.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
