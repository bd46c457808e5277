"""What the privileged quadruped teacher costs, against the best constant gait; ONE JSON object.

    nice -n 10 python benchmarks/quadruped_teacher.py [--terrains 500] [--first-seed 9471000]
        [--workers 2] [--rows runs/quadruped-teacher/rows.jsonl] [--save]

Why: the teacher (`pacplan.worlds.quadruped.teacher`: it tries its 12 candidate gaits in the
simulator before each primitive) is the floor a student can be taught towards, reported next to
the hindsight floor of `results/quadruped-es` (best of the 50 stored policies per terrain). Each
terrain is walked by the teacher and by the best constant gait (the shipped
`quadruped-gait-best.safetensors`, the certified run's baseline row) through pacplan's own
rollout, so both costs are the world's costs: the Derpy in MuJoCo at 23.3°, as `quadruped-paper`
certifies it. The terrains are held out: from `--first-seed` on, checked disjoint from every
shipped quadruped preset's prior, prior_eval, certification and test seeds (the default range is
also past the seeds the teacher's weights were chosen on, 9,470,000–9,470,047).

Reported: per controller the mean cost with a normal 95 % interval (cut at 0: costs are ≥ 0),
falls, finishes, CPU seconds per rollout (process time in the worker) and rollouts per second
of the `--workers` processes (from their rollouts' wall time, so a resumed run adds up); paired
on the same terrains, the teacher's mean minus the gait's with its 95 % interval and the ratio
of the means. A teacher rollout costs a few CPU seconds, so 500 terrains take 15–40 minutes of
two cores: every finished terrain is appended to `--rows` (a JSON line, after a first line that
stamps the settings), and a rerun with the same settings resumes from it (other settings are
refused). `--save` writes the JSON to benchmarks/data/quadruped-teacher.json.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import load_file

from pacplan.errors import PacplanError
from pacplan.presets import seed_ranges
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.teacher import QuadrupedTeacher, TeacherConfig, check_teacher_request
from quadruped_paper_code import load_rows

OPTIONS = {"max_slope_deg": 23.3, "physics": "mujoco", "robot": "derpy"}
FIRST_SEED = 9_471_000
ROOT = Path(__file__).resolve().parents[1]
GAIT = ROOT / "src" / "pacplan" / "presets" / "priors" / "quadruped-gait-best.safetensors"
ROWS = ROOT / "runs" / "quadruped-teacher" / "rows.jsonl"
SAVE = ROOT / "benchmarks" / "data" / "quadruped-teacher.json"
CHUNK = 4  # terrains per task handed to a worker


def preset_seed_ranges() -> dict[str, tuple[int, int]]:
    """Every seed range of every shipped quadruped config (presets and prior recipes)."""
    return seed_ranges("quadruped")


def _walk(seeds: list[int]) -> list[dict[str, Any]]:
    """Teacher and best constant gait on each terrain: cost, fall, finish, CPU seconds."""
    world = QuadrupedWorld(**OPTIONS)
    teacher = QuadrupedTeacher(world)
    theta = load_file(str(GAIT))["theta"]
    rows = []
    for seed in seeds:
        c0, w0 = time.process_time(), time.perf_counter()
        g = world.rollout(theta, seed)
        c1, w1 = time.process_time(), time.perf_counter()
        r = teacher.rollout(seed).result
        c2, w2 = time.process_time(), time.perf_counter()
        rows.append({"seed": seed,
                     "teacher": {"cost": r.cost, "fell": r.fell, "finished": r.finished,
                                 "primitives": r.primitives, "cpu_s": round(c2 - c1, 4),
                                 "wall_s": round(w2 - w1, 4)},
                     "gait": {"cost": g.cost, "fell": g.fell, "finished": g.finished,
                              "primitives": g.primitives, "cpu_s": round(c1 - c0, 4),
                              "wall_s": round(w1 - w0, 4)}})
    world.close()
    return rows


def _stamp(first: int, n: int) -> dict[str, Any]:
    cfg = asdict(TeacherConfig())
    cfg["candidates"] = [asdict(c) for c in TeacherConfig().candidates]
    return {"stamp": {"world": OPTIONS, "teacher": cfg, "gait": GAIT.name,
                      "first_seed": first, "terrains": n}}


def _summary(rows: list[dict[str, Any]], who: str, workers: int) -> dict[str, Any]:
    """Mean cost [95 %], falls, finishes, CPU-s per rollout, rollouts/s of `workers`."""
    c = np.array([r[who]["cost"] for r in rows])
    half = 1.96 * float(c.std(ddof=1)) / math.sqrt(c.size)
    cpu = sum(r[who]["cpu_s"] for r in rows)
    wall = sum(r[who]["wall_s"] for r in rows)
    lo, hi = max(0.0, float(c.mean()) - half), min(1.0, float(c.mean()) + half)
    out = {"mean_cost": round(float(c.mean()), 6),
           "cost_95ci": [round(lo, 6), round(hi, 6)],  # normal, within [0, 1]
           "falls": int(sum(r[who]["fell"] for r in rows)),
           "finishes": int(sum(r[who]["finished"] for r in rows)),
           "cpu_s_per_rollout": round(cpu / len(rows), 3),
           "rollouts_per_s": round(workers * len(rows) / wall, 3)}
    return out


def _paired(a: np.ndarray, b: np.ndarray) -> dict[str, Any]:
    """Mean of a − b per terrain with a normal 95 % interval, and the ratio of the means."""
    d = a - b
    half = 1.96 * float(d.std(ddof=1)) / math.sqrt(d.size)
    return {"difference": round(float(d.mean()), 4),
            "difference_95ci": [round(float(d.mean()) - half, 4),
                                round(float(d.mean()) + half, 4)],
            "ratio": round(float(a.mean()) / max(float(b.mean()), 1e-12), 4)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--terrains", type=int, default=500)
    ap.add_argument("--first-seed", type=int, default=FIRST_SEED)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rows", type=Path, default=ROWS)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args(argv)
    lo, hi = args.first_seed, args.first_seed + args.terrains
    try:
        check_teacher_request("quadruped", OPTIONS, (lo, hi), preset_seed_ranges())
    except PacplanError as exc:
        raise SystemExit(f"error: {exc}") from None
    stamp = _stamp(lo, args.terrains)
    done = load_rows(args.rows, stamp, lambda row: int(row["seed"]))
    todo = [s for s in range(lo, hi) if s not in done]
    t0 = time.perf_counter()
    if todo:
        chunks = [todo[i:i + CHUNK] for i in range(0, len(todo), CHUNK)]
        with ProcessPoolExecutor(args.workers) as pool, args.rows.open("a") as f:
            for fut in as_completed([pool.submit(_walk, c) for c in chunks]):
                for row in fut.result():
                    f.write(json.dumps(row) + "\n")
                    done[row["seed"]] = row
                f.flush()
    wall = time.perf_counter() - t0
    rows = [done[s] for s in range(lo, hi)]
    teacher = np.array([r["teacher"]["cost"] for r in rows])
    gait = np.array([r["gait"]["cost"] for r in rows])
    out = {"benchmark": "quadruped_teacher", "world": OPTIONS,
           "terrains": [lo, hi], "n": len(rows), "workers": args.workers,
           "teacher": {**stamp["stamp"]["teacher"],
                       **_summary(rows, "teacher", args.workers)},
           "best_constant_gait": {"weights": GAIT.name,
                                  **_summary(rows, "gait", args.workers)},
           "teacher_minus_gait": _paired(teacher, gait),
           "gait_falls_teacher_not": int(sum(r["gait"]["fell"] and not r["teacher"]["fell"]
                                             for r in rows)),
           "teacher_falls_gait_not": int(sum(r["teacher"]["fell"] and not r["gait"]["fell"]
                                             for r in rows)),
           "wall_s_all_rollouts": round(sum(r[w]["wall_s"] for r in rows
                                            for w in ("teacher", "gait")) / args.workers, 1),
           "wall_s_this_invocation": round(wall, 1), "rollouts_this_invocation": 2 * len(todo)}
    del out["teacher"]["candidates"]
    out["teacher"]["candidates"] = len(TeacherConfig().candidates)
    text = json.dumps(out)
    print(text)
    if args.save:
        SAVE.write_text(text + "\n")


if __name__ == "__main__":
    main()
