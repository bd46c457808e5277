"""The paper's published Minitaur prior in the paper-code world and in the text world; ONE JSON.

    nice -n 10 python benchmarks/quadruped_paper_code.py [--terrains 200] [--first-seed 9600000]
        [--draws 10] [--workers 2] [--rows runs/quadruped-paper-code/rows.jsonl] [--save]
        [--bullet 40]

Why: pacplan's `quadruped` world follows the paper's text; `variant: paper-code`
(`pacplan.worlds.quadruped.paper_code`) rebuilds the experiment as the paper's code ran it. The
yardstick of that rebuild: the paper's published prior, its first `--draws` policies drawn as
its code drew them (`torch.manual_seed(0)`, `paper_prior.paper_draws`), must cost within ±0.04
of what its own published matrix says they cost (C_minitaur.npy: 0.185 over its 50 draws) on
≥ 200 terrains of the paper-code world. Beside them, on the same terrains and paired: the
paper's mean policy, pacplan's ES-only prior's mean (`quadruped-es`) and the best constant gait
(`quadruped-gait-best`), and all of it again in the text world (the Derpy in MuJoCo at 23.3°, as
`quadruped-paper` certifies it), so docs/worlds.md can put both worlds side by side. Policies
do not transfer between the worlds: each prior wins only under the timing it was trained with.

The paper code's cost was unclipped (|x − 6|/6 exceeds 1 when the torso stands behind x = 0);
the world clips it to [0, 1], and this counts how often the clip binds. Terrain seeds start at
`--first-seed` (the same seed names a box terrain in one world and a ridge terrain in the
other), checked disjoint from every shipped quadruped preset's seeds. Each finished terrain
(both worlds' rows come one world after the other: the paper-code world first) is appended to
`--rows` after a first line stamping the settings; a rerun with the same settings resumes (other
settings are refused). `--save` writes benchmarks/data/quadruped-paper-code.json.

`--bullet N` also walks the first N terrains of the paper-code world in PyBullet, the paper's
engine (`physics: bullet`: pacplan's Bullet Derpy, which benchmarks/quadruped_oracle.py checks
against pybullet_envs itself; about 1 CPU-s a rollout, so N stays small), with its own rows
file (`--rows` with `-bullet` added to its name).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Hashable
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from pacplan.es.checkpoint import load_prior
from pacplan.io.paperdata import paper_data_dir
from pacplan.presets import resolve_prior, seed_ranges
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.paper_prior import load_paper_prior, paper_draws

WORLDS = {"paper-code": {"variant": "paper-code"},
          "text": {"max_slope_deg": 23.3, "physics": "mujoco", "robot": "derpy"}}
BULLET = {"paper-code-bullet": {"variant": "paper-code", "physics": "bullet"}}
FIRST_SEED = 9_600_000
PAPER_MATRIX_COST = 0.185  # the figure: C_minitaur.npy's mean
TOLERANCE = 0.04
ROOT = Path(__file__).resolve().parents[1]
GAIT = ROOT / "src" / "pacplan" / "presets" / "priors" / "quadruped-gait-best.safetensors"
ROWS = ROOT / "runs" / "quadruped-paper-code" / "rows.jsonl"
SAVE = ROOT / "benchmarks" / "data" / "quadruped-paper-code.json"
CHUNK = 2  # terrains per task handed to a worker


def preset_seed_ranges() -> dict[str, tuple[int, int]]:
    """Every seed range of every shipped quadruped config (presets and prior recipes)."""
    return seed_ranges("quadruped")


def policies(draws: int) -> tuple[list[str], np.ndarray]:
    """Column names and (k, 944) float32 weights: the paper's draws, its mean, pacplan's mean,
    the best constant gait."""
    folder = paper_data_dir()
    if folder is None:
        raise SystemExit("the paper's Minitaur prior is not here: run `pacplan data paper`")
    paper_mu, _ = load_paper_prior(folder)
    ours_mu, _ = load_prior(resolve_prior("quadruped-es"))  # the ES-only prior its data measured
    gait = load_file(str(GAIT))["theta"]
    names = [f"paper_draw_{j}" for j in range(draws)] + ["paper_mean", "pacplan_mean",
                                                          "best_constant_gait"]
    thetas = np.vstack([paper_draws(folder, draws), paper_mu[None], ours_mu[None], gait[None]])
    return names, thetas.astype(np.float32)


def _walk(task: tuple[str, list[int], np.ndarray]) -> list[dict[str, Any]]:
    """Every policy on each terrain of one world: cost (and the code's unclipped cost), fall,
    finish, CPU seconds."""
    world_name, seeds, thetas = task
    world = QuadrupedWorld(**{**WORLDS, **BULLET}[world_name])
    rows = []
    for seed in seeds:
        cells = []
        for theta in thetas:
            c0 = time.process_time()
            r = world.rollout(theta, seed)
            cells.append({"cost": r.cost, "raw": getattr(r, "unclipped_cost", r.cost),
                          "fell": r.fell, "finished": r.finished,
                          "cpu_s": round(time.process_time() - c0, 4)})
        rows.append({"world": world_name, "seed": seed, "cells": cells})
    world.close()
    return rows


def load_rows(path: Path, stamp: dict[str, Any], key: Callable[[dict[str, Any]], Hashable],
              refusal: str = "was written with other settings: move it away or pass another "
                             "--rows") -> dict[Hashable, dict[str, Any]]:
    """Finished rows of an earlier run with the same settings (`stamp`, the file's first line),
    each under `key(row)`; a line torn by a kill is dropped, a file with another stamp refused
    with `path` and `refusal` (its `{found}`: that file's stamp). A missing or empty file is
    started with the stamp."""
    if not path.is_file() or path.stat().st_size == 0:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stamp) + "\n")
        return {}
    lines = path.read_text().splitlines()
    if json.loads(lines[0]) != stamp:
        raise SystemExit(f"{path} {refusal.format(found=lines[0])}")
    rows = {}
    for line in lines[1:]:
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line torn by a kill
        rows[key(row)] = row
    return rows


def mean_ci(c: np.ndarray) -> dict[str, Any]:
    half = 1.96 * float(c.std(ddof=1)) / math.sqrt(c.size) if c.size > 1 else float("nan")
    return {"mean_cost": round(float(c.mean()), 4),
            "cost_95ci": [round(max(0.0, float(c.mean()) - half), 4),
                          round(min(1.0, float(c.mean()) + half), 4)]}


def paired(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Mean of a − b per terrain with a normal 95 % interval."""
    d = a - b
    half = 1.96 * float(d.std(ddof=1)) / math.sqrt(d.size)
    return {"difference": round(float(d.mean()), 4),
            "difference_95ci": [round(float(d.mean()) - half, 4),
                                round(float(d.mean()) + half, 4)]}


def summarise(rows: list[dict[str, Any]], names: list[str], draws: int) -> dict[str, Any]:
    """One world's figures from its rows (terrains × policies)."""
    cost = np.array([[c["cost"] for c in r["cells"]] for r in rows])
    raw = np.array([[c["raw"] for c in r["cells"]] for r in rows])
    fell = np.array([[c["fell"] for c in r["cells"]] for r in rows])
    fin = np.array([[c["finished"] for c in r["cells"]] for r in rows])
    cpu = np.array([[c["cpu_s"] for c in r["cells"]] for r in rows])
    col = {n: i for i, n in enumerate(names)}
    draws_cost = cost[:, :draws].mean(axis=1)

    def one(name: str) -> dict[str, Any]:
        j = col[name]
        return {**mean_ci(cost[:, j]), "falls": int(fell[:, j].sum()),
                "finishes": int(fin[:, j].sum())}

    return {
        "paper_prior_draws": {**mean_ci(draws_cost), "falls": int(fell[:, :draws].sum()),
                              "finishes": int(fin[:, :draws].sum()),
                              "per_draw": [round(float(v), 4)
                                           for v in cost[:, :draws].mean(axis=0)]},
        "paper_prior_mean": one("paper_mean"),
        "pacplan_prior_mean": one("pacplan_mean"),
        "best_constant_gait": one("best_constant_gait"),
        "paired": {
            "paper_draws_minus_gait": paired(draws_cost, cost[:, col["best_constant_gait"]]),
            "paper_mean_minus_gait": paired(cost[:, col["paper_mean"]],
                                             cost[:, col["best_constant_gait"]]),
            "pacplan_mean_minus_gait": paired(cost[:, col["pacplan_mean"]],
                                               cost[:, col["best_constant_gait"]]),
            "paper_draws_minus_pacplan_mean": paired(draws_cost, cost[:, col["pacplan_mean"]]),
        },
        "clip_binds": {"cells": int((raw > 1.0).sum()), "of": int(raw.size),
                       "paper_draw_cells": int((raw[:, :draws] > 1.0).sum()),
                       "max_unclipped": round(float(raw.max()), 4)},
        "cpu_s_per_rollout": round(float(cpu.mean()), 3),
    }


def _run(path: Path, stamp: dict[str, Any], worlds: dict[str, Any], seeds: range,
         thetas: np.ndarray, workers: int) -> dict[tuple[str, int], dict[str, Any]]:
    """Every (world, terrain) row of `worlds` × `seeds`, resumed from `path` and appended to
    it as each chunk of terrains finishes."""
    done = load_rows(path, stamp, lambda row: (row["world"], int(row["seed"])))
    todo = [(w, s) for w in worlds for s in seeds if (w, s) not in done]
    if todo:
        tasks = []
        for w in worlds:
            left = [s for ww, s in todo if ww == w]
            tasks += [(w, left[i:i + CHUNK], thetas) for i in range(0, len(left), CHUNK)]
        with ProcessPoolExecutor(workers) as pool, path.open("a") as f:
            for fut in as_completed([pool.submit(_walk, t) for t in tasks]):
                for row in fut.result():
                    f.write(json.dumps(row) + "\n")
                    done[(row["world"], row["seed"])] = row
                f.flush()
    return done


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--terrains", type=int, default=200)
    ap.add_argument("--first-seed", type=int, default=FIRST_SEED)
    ap.add_argument("--draws", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=Path, default=ROWS)
    ap.add_argument("--save", action="store_true")
    ap.add_argument("--bullet", type=int, default=0,
                    help="also walk the first N terrains of the paper-code world in PyBullet")
    args = ap.parse_args(argv)
    lo, hi = args.first_seed, args.first_seed + args.terrains
    for what, (a, b) in preset_seed_ranges().items():
        if a < hi and lo < b:
            raise SystemExit(f"error: terrains [{lo}, {hi}) overlap {what} seeds [{a}, {b})")
    names, thetas = policies(args.draws)
    stamp = {"stamp": {"worlds": WORLDS, "policies": names, "first_seed": lo,
                       "terrains": args.terrains,
                       "weights_sha": __import__("hashlib").sha256(thetas.tobytes()).hexdigest()}}
    t0 = time.perf_counter()
    done = _run(args.rows, stamp, WORLDS, range(lo, hi), thetas, args.workers)
    if args.bullet:
        b_stamp = {"stamp": {k: v for k, v in stamp["stamp"].items() if k != "terrains"}
                   | {"worlds": BULLET}}  # rows are per terrain: a larger --bullet resumes
        b_rows = args.rows.with_name(f"{args.rows.stem}-bullet{args.rows.suffix}")
        done |= _run(b_rows, b_stamp, BULLET, range(lo, lo + args.bullet), thetas, args.workers)
    out: dict[str, Any] = {"benchmark": "quadruped_paper_code", "worlds": WORLDS,
                           "terrains": [lo, hi], "draws": args.draws,
                           "draws_as": "torch.manual_seed(0), randn((draws, 944)), paper layout"}
    folder = paper_data_dir()
    matrix = np.load(Path(folder) / "C_minitaur.npy", allow_pickle=False) if folder else None
    if matrix is not None:
        out["paper_matrix"] = {"mean": round(float(matrix.mean()), 4),
                               "first_draws_mean": round(float(matrix[:, :args.draws].mean()), 4),
                               "shape": list(matrix.shape)}
    for w in [*WORLDS, *(BULLET if args.bullet else {})]:
        rows = [done[(w, s)] for s in range(lo, hi) if (w, s) in done]
        if rows:
            out[w] = {"n": len(rows), **summarise(rows, names, args.draws)}
    if "paper-code" in out:
        got = out["paper-code"]["paper_prior_draws"]["mean_cost"]
        out["yardstick"] = {"target": PAPER_MATRIX_COST, "tolerance": TOLERANCE,
                            "measured": got, "met": bool(abs(got - PAPER_MATRIX_COST)
                                                         <= TOLERANCE)}
    if "paper-code-bullet" in out:
        got = out["paper-code-bullet"]["paper_prior_draws"]["mean_cost"]
        out["yardstick_bullet"] = {"target": PAPER_MATRIX_COST, "tolerance": TOLERANCE,
                                   "measured": got, "terrains": out["paper-code-bullet"]["n"],
                                   "within": bool(abs(got - PAPER_MATRIX_COST) <= TOLERANCE)}
    out["wall_s_this_invocation"] = round(time.perf_counter() - t0, 1)
    text = json.dumps(out)
    print(text)
    if args.save:
        SAVE.write_text(text + "\n")


if __name__ == "__main__":
    main()
