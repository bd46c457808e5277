"""The exploratory measurements behind the quadruped distillation's design (docs/results.md,
"Teaching the quadruped"); prints ONE JSON object per call.

    python benchmarks/quadruped_distill_explore.py label r0 0 96            # the teacher walks
    python benchmarks/quadruped_distill_explore.py fit r0 out/s0.npy          # expected score
    python benchmarks/quadruped_distill_explore.py label r1 0 96 out/s0.npy  # the student walks
    python benchmarks/quadruped_distill_explore.py fit r0,r1 out/s1.npy
    python benchmarks/quadruped_distill_explore.py eval out/s1.npy 300000 100 [--gait] [--es]

Why a script beside the stage: the design was chosen by fitting and walking small variants
(which loss, how many DAgger rounds) on the same labelled terrains, which the resumable stage
(`pacplan train-prior quadruped-prior`) does not do. Labels go to
runs/quadruped-distill-explore/<tag>/<seed>.npz (one terrain each, kept: a rerun resumes);
the fit is `pacplan.worlds.quadruped.distill.fit` from the best constant gait, 100 epochs, lr
0.01, batch 64, kernel 0.02, as the stage runs it; `eval` walks a net (a .npy of 944 weights)
on held-out prior_eval terrains with two processes, and `--gait` / `--es` walk the best
constant gait / the shipped ES prior's mean on the same terrains instead.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

OPTIONS = {"max_slope_deg": 23.3, "physics": "mujoco", "robot": "derpy"}
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "runs" / "quadruped-distill-explore"
_WORLD: dict[str, Any] = {}


def _world() -> tuple[Any, Any]:
    if not _WORLD:
        import torch

        from pacplan.worlds.quadruped import QuadrupedWorld
        from pacplan.worlds.quadruped.teacher import QuadrupedTeacher

        torch.set_num_threads(1)
        _WORLD["world"] = QuadrupedWorld(**OPTIONS)
        _WORLD["teacher"] = QuadrupedTeacher(_WORLD["world"])
    return _WORLD["world"], _WORLD["teacher"]


def _label(args: tuple[int, str | None, str]) -> float:
    """Walk terrain `seed` (the teacher's gaits, or the student's), every state scored."""
    from pacplan.worlds.quadruped.distill import label_episode

    seed, student, tag = args
    path = DATA / tag / f"{seed}.npz"
    if not path.exists():
        world, teacher = _world()
        theta = None if student is None else np.load(student, allow_pickle=False)
        t0 = time.process_time()
        data, cost = label_episode(world, teacher, seed, theta)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".part.npz")
        np.savez(tmp, cost=np.array(cost), cpu=np.array(time.process_time() - t0),
                 **data.arrays())
        tmp.replace(path)
    with np.load(path, allow_pickle=False) as z:
        return float(z["cost"])


def _walk(args: tuple[np.ndarray, list[int]]) -> list[float]:
    world, _ = _world()
    theta, seeds = args
    return world.costs(theta[None], np.array(seeds)).ravel().tolist()


def _pool() -> ProcessPoolExecutor:
    return ProcessPoolExecutor(2, mp_context=mp.get_context("spawn"))


def label(tag: str, lo: int, hi: int, student: str | None) -> dict[str, Any]:
    with _pool() as pool:
        costs = list(pool.map(_label, [(s, student, tag) for s in range(lo, hi)]))
    return {"tag": tag, "terrains": [lo, hi], "walker": student or "teacher",
            "walk_cost": float(np.mean(costs))}


def fit(tags: list[str], out: str) -> dict[str, Any]:
    from pacplan.worlds.quadruped.distill import Labelled, candidate_etas
    from pacplan.worlds.quadruped.distill import fit as fit_net
    from pacplan.worlds.quadruped.policy import gait_theta
    from pacplan.worlds.quadruped.teacher import BEST_CONSTANT_GAIT, TeacherConfig

    parts = []
    for tag in tags:
        for f in sorted((DATA / tag).glob("*.npz")):
            if ".part" in f.name:
                continue
            with np.load(f, allow_pickle=False) as z:
                parts.append(Labelled(z["seed"], z["primitive"], z["depth"], z["proprio"],
                                      z["scores"]))
    data = Labelled.concat(parts)
    t0 = time.perf_counter()
    theta, losses = fit_net(gait_theta(BEST_CONSTANT_GAIT), data, data.scores,
                            candidate_etas(TeacherConfig()), kernel=0.02, epochs=100, lr=0.01,
                            batch=64, seed=0)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    np.save(out, theta)
    return {"tags": tags, "states": len(data), "loss": [losses[0], losses[-1]],
            "seconds": round(time.perf_counter() - t0, 1), "out": out}


def evaluate(theta_path: str, lo: int, n: int, gait: bool, es: bool) -> dict[str, Any]:
    from safetensors.numpy import load_file

    from pacplan.presets import shipped_priors
    from pacplan.worlds.quadruped.policy import gait_theta
    from pacplan.worlds.quadruped.teacher import BEST_CONSTANT_GAIT

    if gait:
        theta, what = gait_theta(BEST_CONSTANT_GAIT), "best constant gait"
    elif es:
        theta = load_file(str(shipped_priors()["quadruped-es"]))["mu"]
        what = "ES-only prior mean (quadruped-es)"
    else:
        theta, what = np.load(theta_path, allow_pickle=False), theta_path
    seeds = list(range(lo, lo + n))
    with _pool() as pool:
        parts = list(pool.map(_walk, [(np.asarray(theta, np.float32), seeds[i::2])
                                      for i in range(2)]))
    c = np.array(parts[0] + parts[1])
    return {"policy": what, "terrains": [lo, lo + n], "mean": float(c.mean()),
            "se": float(c.std() / np.sqrt(len(c))), "finishes": int((c == 0).sum())}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("label")
    p.add_argument("tag")
    p.add_argument("lo", type=int)
    p.add_argument("hi", type=int)
    p.add_argument("student", nargs="?")
    p = sub.add_parser("fit")
    p.add_argument("tags")
    p.add_argument("out")
    p = sub.add_parser("eval")
    p.add_argument("theta")
    p.add_argument("lo", type=int)
    p.add_argument("n", type=int)
    p.add_argument("--gait", action="store_true")
    p.add_argument("--es", action="store_true")
    a = ap.parse_args(argv)
    if a.cmd == "label":
        out = label(a.tag, a.lo, a.hi, a.student)
    elif a.cmd == "fit":
        out = fit(a.tags.split(","), a.out)
    else:
        out = evaluate(a.theta, a.lo, a.n, a.gait, a.es)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
