"""The distillation stage of `pacplan train-prior`: teach the policy net from a privileged
teacher on prior seeds, then let ES start from what it learnt.

Rounds, each written to `distill/` in the run directory before the next starts, so a killed
run resumes at the first unfinished round and reproduces every weight to the bit:
- lattices: the teacher (`worlds.uav.teacher`) solves `distill.envs` prior-training
  environments, chunk by chunk (`distill/lattice/<chunk>.npz`);
- round 0: behaviour cloning on the teacher's own plan states plus random collision-free
  reachable states; rounds 1..R: the student flies the same environments and every state it
  visits is relabelled by the teacher and added (DAgger), then the net is refit from the last
  round's weights;
- `distill/theta.safetensors`: the result, which initialises the ES mean; `distill/record.json`
  summarises the stage (seeds, sizes, times, held-out costs) and goes into the prior's metadata.

The teacher sees only seeds.prior; the stage refuses, before any work, a world the teacher does
not support or teacher seeds overlapping seeds.cert / seeds.test.
"""

from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import DistillConfig, RunConfig
from pacplan.errors import PacplanError
from pacplan.files import (
    append_json_line,
    atomic_save_npy,
    atomic_write_json,
    load_npy,
    save_safetensors,
)
from pacplan.weights import load_theta

DIR = "distill"
THETA = "theta.safetensors"
RECORD = "record.json"
LOG = "rounds.jsonl"
_CHUNK = 16  # environments per lattice file


def teacher_seeds(cfg: RunConfig) -> tuple[int, int]:
    """The prior-training environments the teacher solves: the first distill.envs of seeds.prior."""
    d = _cfg(cfg)
    start = int(cfg.seeds.prior[0])
    if d.envs > cfg.seeds.prior[1] - start:
        raise PacplanError(f"distill.envs {d.envs} exceeds the {cfg.seeds.prior[1] - start} "
                           f"seeds of seeds.prior {list(cfg.seeds.prior)}")
    return start, start + d.envs


def _cfg(cfg: RunConfig) -> DistillConfig:
    if cfg.distill is None:
        raise PacplanError("this config has no distill section")
    return cfg.distill


def check_request(cfg: RunConfig) -> None:
    """The one-line refusals, before any work (world, seed overlap, sizes)."""
    from pacplan.worlds.uav.teacher import check_teacher_request

    check_teacher_request(cfg.world.name, teacher_seeds(cfg),
                          {"cert": cfg.seeds.cert, "test": cfg.seeds.test})
    if cfg.world.options.get("simulator", "batched") != "batched":
        raise PacplanError("distillation needs the batched UAV simulator (world option "
                           "simulator: batched)")
    extra = set(cfg.world.options) - {"simulator", "compile", "net_scale", "device"}
    if extra:
        raise PacplanError(f"the teacher plans only in the certified UAV world; options "
                           f"{sorted(extra)} change it")


def distill(cfg: RunConfig, run_dir: str | Path, log: Any = None) -> Path:
    """Run (or resume) the distillation stage; returns the distilled θ file."""
    check_request(cfg)
    d = _cfg(cfg)
    out = Path(run_dir) / DIR
    final = out / THETA
    if final.is_file():
        return final
    say = log or (lambda _m: None)
    (out / "lattice").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    lo, hi = teacher_seeds(cfg)
    seeds = np.arange(lo, hi, dtype=np.int64)
    _solve_lattices(seeds, d, out / "lattice", say)
    lattice = _load_lattices(seeds, d, out / "lattice")
    t_lattice = time.perf_counter() - t0
    net_scale = float(cfg.world.options.get("net_scale", 5.0))
    sim = _sim()
    eval_seeds = _eval_seeds(cfg)
    theta = None
    cache: dict[tuple[int, ...], np.ndarray] = {}
    for r in range(d.rounds + 1):
        tf = out / f"round-{r}.safetensors"
        if tf.is_file():
            theta = load_theta(tf, _dim())
            continue
        theta = _round(r, theta, lattice, seeds, d, net_scale, sim, out, eval_seeds, say, cache)
        save_safetensors(tf, {"theta": theta})
    assert theta is not None
    record = {
        "teacher": "uav lattice dynamic program (pacplan.worlds.uav.teacher)",
        "seeds": [lo, hi], "rounds": d.rounds, "config": d.model_dump(mode="json"),
        "seconds_this_call": round(time.perf_counter() - t0, 1),
        "seconds_lattice_this_call": round(t_lattice, 1),
        "rounds_log": _read_log(out / LOG),
    }
    atomic_write_json(out / RECORD, record)
    save_safetensors(final, {"theta": theta}, {"distill": json.dumps(summary(record))})
    return final


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """What the prior's metadata states about its distillation (short)."""
    last = record["rounds_log"][-1] if record["rounds_log"] else {}
    return {"teacher": record["teacher"], "seeds": record["seeds"], "rounds": record["rounds"],
            "states": last.get("states"), "eval_cost": last.get("eval_cost"),
            "eval_envs": last.get("eval_envs")}


def distilled_summary(path: str | Path) -> dict[str, Any]:
    """The summary a distilled θ file carries in its metadata (`summary`)."""
    from pacplan.files import safetensors_metadata

    meta = safetensors_metadata(Path(path).read_bytes())
    return json.loads(meta.get("distill", "{}"))


def _dim() -> int:
    from pacplan.worlds.uav.spec import POLICY_DIM

    return POLICY_DIM


def _sim() -> Any:
    from pacplan.worlds.uav.batched import BatchedSimulator

    return BatchedSimulator(compile=False)


def _eval_seeds(cfg: RunConfig) -> np.ndarray | None:
    d = _cfg(cfg)
    if not d.eval_envs or cfg.seeds.prior_eval is None:
        return None
    start = int(cfg.seeds.prior_eval[0])
    n = min(d.eval_envs, int(cfg.seeds.prior_eval[1]) - start)
    return np.arange(start, start + n, dtype=np.int64)


def _solve_chunk(args: tuple[list[int], float, str]) -> str:
    """Solve one chunk of lattices into its file (a worker process)."""
    import torch

    from pacplan.worlds.uav.teacher import solve

    torch.set_num_threads(1)
    seeds, cap, path = args
    lat = solve(seeds, clear_cap=cap)
    tmp = path + ".tmp.npz"
    np.savez(tmp, seeds=lat.seeds, first=lat.first, clear=lat.clear,
             q_cost=lat.q_cost.astype(np.float32), q_clear=lat.q_clear.astype(np.float32))
    os.replace(tmp, path)
    return path


def _chunk_paths(seeds: np.ndarray, folder: Path) -> list[tuple[list[int], Path]]:
    return [([int(s) for s in seeds[i : i + _CHUNK]], folder / f"{int(seeds[i])}.npz")
            for i in range(0, len(seeds), _CHUNK)]


def _solve_lattices(seeds: np.ndarray, d: DistillConfig, folder: Path, say: Any) -> None:
    todo = [(s, p) for s, p in _chunk_paths(seeds, folder) if not p.is_file()]
    if not todo:
        return
    say(f"teacher: solving {sum(len(s) for s, _ in todo)} lattices")
    jobs = [(s, d.clear_cap, str(p)) for s, p in todo]
    if d.workers <= 1:
        for j in jobs:
            _solve_chunk(j)
        return
    import multiprocessing as mp

    with ProcessPoolExecutor(d.workers, mp_context=mp.get_context("spawn")) as pool:
        for _ in pool.map(_solve_chunk, jobs):
            pass


def _load_lattices(seeds: np.ndarray, d: DistillConfig, folder: Path) -> Any:
    """One `Lattice` over all teacher environments (values as stored, float32)."""
    from pacplan.worlds.uav.teacher import Lattice

    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("seeds", "first", "clear", "q_cost",
                                                           "q_clear")}
    for _, p in _chunk_paths(seeds, folder):
        with np.load(p, allow_pickle=False) as z:
            for k in parts:
                parts[k].append(z[k])
    a = {k: np.concatenate(v) for k, v in parts.items()}
    if not np.array_equal(a["seeds"], seeds):
        raise PacplanError(f"{folder}: lattice files do not hold seeds {seeds[0]}…{seeds[-1]}")
    empty = np.zeros(0)
    return Lattice(a["seeds"], a["first"], a["clear"], a["q_cost"], a["q_clear"], empty, empty,
                   d.clear_cap)


def _round(r: int, theta: np.ndarray | None, lattice: Any, seeds: np.ndarray, d: DistillConfig,
           net_scale: float, sim: Any, out: Path, eval_seeds: np.ndarray | None, say: Any,
           cache: dict[tuple[int, ...], np.ndarray]) -> np.ndarray:
    """One round: gather states, label, render, fit; logs a line to rounds.jsonl."""
    import torch

    from pacplan.worlds.uav import distill as dl
    from pacplan.worlds.uav import policy as pol

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    rng = np.random.default_rng([d.seed, r])
    if r == 0:
        plan = lattice.plan()
        states = dl.States.concat([dl.visited(seeds, plan, lattice),
                                   dl.free_states(lattice, d.free_states, rng)])
        torch.manual_seed(d.seed)
        theta = pol.flatten_net(pol.ResidualNet()).astype(np.float32)
    else:
        assert theta is not None
        before = dl.States(*(load_npy(out / f"states-{r - 1}.npy")[:, i] for i in range(4)))
        res = sim.rollout(theta[None], seeds, net_scale=net_scale)
        states = dl.States.concat([before, dl.visited(seeds, res.prims[:, 0], lattice)])
    states = states.unique()
    atomic_save_npy(out / f"states-{r}.npy",
                    np.stack([states.seed, states.step, states.ix, states.iz], 1))
    target = dl.preferences(lattice, states, d.target_temperature)
    images = dl.render(sim, states, cache)
    t1 = time.perf_counter()
    theta, losses = dl.fit(theta, images, target, epochs=d.epochs, lr=d.lr, batch=d.batch,
                           temperature=d.temperature, net_scale=net_scale, seed=d.seed + r)
    rec: dict[str, Any] = {"round": r, "states": len(states), "loss": losses,
                           "agreement": dl.agreement(theta, images, target, net_scale),
                           "seconds_data": round(t1 - t0, 1),
                           "seconds_fit": round(time.perf_counter() - t1, 1)}
    if eval_seeds is not None:
        t2 = time.perf_counter()
        rec["eval_cost"] = float(sim.rollout(theta[None], eval_seeds,
                                             net_scale=net_scale).costs.mean())
        rec["eval_envs"] = len(eval_seeds)
        rec["seconds_eval"] = round(time.perf_counter() - t2, 1)
    append_json_line(out / LOG, rec)
    say(f"distill round {r}: {len(states)} states, agreement {rec['agreement']:.3f}"
        + (f", held-out cost {rec['eval_cost']:.4f}" if "eval_cost" in rec else ""))
    return theta


def _read_log(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rounds: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        if line.strip():
            rec = json.loads(line)
            rounds[int(rec["round"])] = rec  # a round rerun after a kill replaces its line
    return [rounds[k] for k in sorted(rounds)]
