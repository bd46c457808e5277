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

Every checkpoint (lattice chunk, round's states and weights, θ) is written atomically, then
listed with its sha256 in `distill/ledger.jsonl` (`pacplan.pipeline.execution.chunks.Ledger`, as a
cost matrix's chunks are), and read only once checked: what a kill leaves (a file not yet listed, a
torn last line of the ledger or of rounds.jsonl) is recomputed silently, to the same bytes; a
listed file whose bytes changed (an edit) is refused, naming it. A round is trusted only as a
chain: the first round not finished and every round after it are recomputed. A round's log
record lives in its weights file, so rounds.jsonl is for people only. The folder is stamped
(inputs.json) with what the result depends on; other settings are refused, not mixed in.

The teacher sees only seeds.prior; the stage refuses, before any work, a world the teacher does
not support or teacher seeds overlapping seeds.cert / seeds.test.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import DistillConfig, RunConfig
from pacplan.errors import PacplanError
from pacplan.io.files import (
    atomic_write_bytes,
    atomic_write_json,
    npy_bytes,
    npy_from_bytes,
    npz_arrays,
    npz_bytes,
    safetensors_bytes,
    safetensors_metadata,
    sha256_bytes,
)
from pacplan.pipeline.execution.chunks import ChunkStore, Ledger
from pacplan.pipeline.execution.parallel import spawned_pool
from pacplan.pipeline.prior.distill_quadruped import FILES as QUADRUPED_FILES
from pacplan.pipeline.prior.distill_store import LOG, mend_log, read_round, write_round
from pacplan.pipeline.rundir import RunDir, identity
from pacplan.worlds.base import world_teacher

DIR = "distill"
THETA = "theta.safetensors"
RECORD = "record.json"
STAMP = "inputs.json"
_CHUNK = 16  # environments per lattice file
_FILES = re.compile(r"lattice/\d+\.npz|states-\d+\.npy|round-\d+\.safetensors|theta\.safetensors|"
                    + QUADRUPED_FILES)


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


def _look_ahead(cfg: RunConfig) -> bool:
    """Whether the world's teacher is the quadruped's look-ahead (else the UAV's lattice): the
    world names its teacher (`pacplan.worlds.base.world_teacher`), never its name here."""
    return world_teacher(cfg.world.name) == "quadruped-look-ahead"


def check_request(cfg: RunConfig) -> None:
    """The one-line refusals, before any work (world, seed overlap, sizes)."""
    if _look_ahead(cfg):
        from pacplan.pipeline.prior.distill_quadruped import check_request as check_quadruped

        check_quadruped(cfg, teacher_seeds(cfg))
        return
    from pacplan.worlds.uav.teacher import check_teacher_request

    check_teacher_request(cfg.world.name, teacher_seeds(cfg),
                          {"cert": cfg.seeds.cert, "test": cfg.seeds.test})
    if cfg.world.options.get("simulator", "batched") != "batched":
        raise PacplanError("distillation needs the batched UAV simulator (world option "
                           "simulator: batched)")
    _family(cfg)  # an unknown policy family or width, in one line
    extra = set(cfg.world.options) - {"simulator", "compile", "net_scale", "device", "policy",
                                      "policy_width"}
    if extra:
        raise PacplanError(f"the teacher plans only in the certified UAV world; options "
                           f"{sorted(extra)} change it")


def distill(cfg: RunConfig, run_dir: str | Path | RunDir, log: Any = None) -> Path:
    """Run (or resume) the distillation stage; returns the distilled θ file (checked)."""
    check_request(cfg)
    d = _cfg(cfg)
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    out = rd.path / DIR
    final = out / THETA
    _stamp(out, _inputs(cfg), rd.option)
    files = Ledger(out, "file", lambda e: _FILES.fullmatch(e["file"]) is not None,
                   "distillation file")
    if files.read(THETA) is not None:
        return final
    say = log or (lambda _m: None)
    mend_log(out / LOG)
    t0 = time.perf_counter()
    lo, hi = teacher_seeds(cfg)
    seeds = np.arange(lo, hi, dtype=np.int64)
    if _look_ahead(cfg):
        from pacplan.pipeline.prior import distill_quadruped

        theta, records, chosen = distill_quadruped.rounds(cfg, seeds, _eval_seeds(cfg), files,
                                                          say)
        record: dict[str, Any] = {"teacher": distill_quadruped.teacher_name(cfg.world.options),
                                  "chosen_round": chosen}
    else:
        theta, records, t_lattice = _uav_rounds(cfg, seeds, files, say)
        record = {"teacher": "uav lattice dynamic program (pacplan.worlds.uav.teacher)"}
    record.update({"seeds": [lo, hi], "rounds": d.rounds, "config": d.model_dump(mode="json"),
                   "seconds_this_call": round(time.perf_counter() - t0, 1)})
    if not _look_ahead(cfg):
        record["seconds_lattice_this_call"] = round(t_lattice, 1)
    record["rounds_log"] = records
    atomic_write_json(out / RECORD, record)
    files.write(THETA, safetensors_bytes({"theta": theta},
                                         {"distill": json.dumps(summary(record))}))
    return final


def _uav_rounds(cfg: RunConfig, seeds: np.ndarray, files: Ledger, say: Any
                ) -> tuple[np.ndarray, list[dict[str, Any]], float]:
    """The UAV's lattices and rounds (resumed from the first unfinished one): the last θ, every
    round's record and the seconds spent solving lattices in this call."""
    d = _cfg(cfg)
    t0 = time.perf_counter()
    lattice = _lattices(seeds, d, files, say)
    t_lattice = time.perf_counter() - t0
    net_scale = float(cfg.world.options.get("net_scale", 5.0))
    family = _family(cfg)
    sim = _sim()
    eval_seeds = _eval_seeds(cfg)
    done = [_finished_round(files, r, family.dim)  # checks every listed one
            for r in range(d.rounds + 1)]
    first = next((r for r, f in enumerate(done) if f is None), d.rounds + 1)
    kept = [f for f in done[:first] if f is not None]
    records = [f[2] for f in kept]
    theta, states = (kept[-1][0], kept[-1][1]) if kept else (None, None)
    cache: dict[tuple[int, ...], np.ndarray] = {}
    for r in range(first, d.rounds + 1):
        theta, states, rec = _round(r, theta, states, lattice, seeds, d, net_scale, family,
                                    sim, files, eval_seeds, say, cache)
        records.append(rec)
    assert theta is not None
    return theta, records, t_lattice


def _family(cfg: RunConfig) -> Any:
    """The UAV policy family the student is (world options policy, policy_width)."""
    from pacplan.worlds.uav.families import policy_family

    opts = cfg.world.options
    return policy_family(opts.get("policy", "paper"), opts.get("policy_width"))


def _inputs(cfg: RunConfig) -> dict[str, Any]:
    """What the distilled θ depends on (the settings, the teacher's and held-out seeds, the
    UAV net's scale and policy family, or the quadruped's world), not where it runs (workers,
    threads). The paper's net adds no entry, so its stamps are those made before families."""
    settings = _cfg(cfg).model_dump(mode="json")
    settings.pop("workers")
    ev = _eval_seeds(cfg)
    inputs = {"distill": settings, "seeds": list(teacher_seeds(cfg)),
              "eval_seeds": None if ev is None else [int(ev[0]), int(ev[-1]) + 1],
              "net_scale": float(cfg.world.options.get("net_scale", 5.0))}
    if _look_ahead(cfg):  # its world options shape every label
        del inputs["net_scale"]
        inputs["world"] = {k: v for k, v in cfg.world.options.items() if k != "threads"}
    elif not _family(cfg).is_paper:
        inputs["policy"] = _family(cfg).options()
    return inputs


def _stamp(out: Path, inputs: dict[str, Any], option: str) -> None:
    """Stamp `out` with `inputs`, or refuse a folder made from others: its checkpoints would
    give another prior (a chunk folder's stamp, `ChunkStore`, in the same format)."""
    path = out / STAMP
    if not path.is_file():
        atomic_write_json(path, {"identity": identity(inputs), "inputs": inputs})
        return
    old = ChunkStore.stamped_inputs(out)
    if old is None:
        raise PacplanError(f"{path}: damaged stamp, so the distillation beside it is unchecked; "
                           f"delete {out} to distil again")
    if identity(old) != identity(inputs):
        changed = sorted(f"distill.{k}" for k in inputs["distill"]
                         if identity(inputs["distill"][k]) != identity(
                             (old.get("distill") or {}).get(k)))
        changed += sorted(k for k in inputs if k != "distill"
                          and identity(inputs[k]) != identity(old.get(k)))
        raise PacplanError(f"{out} was distilled with other settings (changed: "
                           f"{', '.join(changed) or 'its stamp'}); use a new {option} directory, "
                           f"or delete {out} to distil again")


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """What the prior's metadata states about its distillation (short): the result's round
    (the last, or the one chosen on held-out terrains, `chosen_round`)."""
    log = record["rounds_log"]
    used = log[record.get("chosen_round", len(log) - 1)] if log else {}
    out = {"teacher": record["teacher"], "seeds": record["seeds"], "rounds": record["rounds"],
           "states": used.get("states"), "eval_cost": used.get("eval_cost"),
           "eval_envs": used.get("eval_envs")}
    if "chosen_round" in record:
        out["chosen_round"] = record["chosen_round"]
    return out


def distilled_summary(path: str | Path) -> dict[str, Any]:
    """The summary a distilled θ file carries in its metadata (`summary`)."""
    meta = safetensors_metadata(Path(path).read_bytes())
    return json.loads(meta.get("distill", "{}"))


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
    """Solve one chunk of lattices into its file (a worker process); returns its sha256, which
    the caller lists once the file is whole."""
    import torch

    from pacplan.worlds.uav.teacher import solve

    torch.set_num_threads(1)
    seeds, cap, path = args
    lat = solve(seeds, clear_cap=cap)
    data = npz_bytes({"seeds": lat.seeds, "first": lat.first, "clear": lat.clear,
                       "q_cost": lat.q_cost.astype(np.float32),
                       "q_clear": lat.q_clear.astype(np.float32)})
    atomic_write_bytes(path, data)
    return sha256_bytes(data)


_LATTICE_KEYS = ("seeds", "first", "clear", "q_cost", "q_clear")


def _npz_arrays(data: bytes, name: str) -> dict[str, np.ndarray]:
    """A lattice chunk's arrays from bytes already checked (never a pickle)."""
    return npz_arrays(data, name, _LATTICE_KEYS, "lattice")


def _chunk_names(seeds: np.ndarray) -> list[tuple[list[int], str]]:
    return [([int(s) for s in seeds[i : i + _CHUNK]], f"lattice/{int(seeds[i])}.npz")
            for i in range(0, len(seeds), _CHUNK)]


def _lattices(seeds: np.ndarray, d: DistillConfig, files: Ledger, say: Any) -> Any:
    """One `Lattice` over all teacher environments (values as stored, float32): the listed
    chunks, checked (an edited one is refused before any solving), and the others solved."""
    from pacplan.worlds.uav.teacher import Lattice

    chunks = _chunk_names(seeds)
    parts: dict[str, dict[str, np.ndarray]] = {}
    for _, name in chunks:
        data = files.read(name)
        if data is not None:
            parts[name] = _npz_arrays(data, str(files.folder / name))
    todo = [(s, name) for s, name in chunks if name not in parts]
    if todo:
        say(f"teacher: solving {sum(len(s) for s, _ in todo)} lattices")
        jobs = [(s, d.clear_cap, str(files.folder / name)) for s, name in todo]
        for (_, name), sha in zip(todo, _solve_all(jobs, d.workers), strict=True):
            files.record(name, sha)  # after the file is whole: a kill leaves it unlisted
            parts[name] = _npz_arrays(files.checked(name), str(files.folder / name))
    a = {k: np.concatenate([parts[name][k] for _, name in chunks]) for k in _LATTICE_KEYS}
    if not np.array_equal(a["seeds"], seeds):
        raise PacplanError(f"{files.folder / 'lattice'}: lattice files do not hold seeds "
                           f"{seeds[0]}…{seeds[-1]}; delete them to recompute them")
    empty = np.zeros(0)
    return Lattice(a["seeds"], a["first"], a["clear"], a["q_cost"], a["q_clear"], empty, empty,
                   d.clear_cap)


def _solve_all(jobs: list[tuple[list[int], float, str]], workers: int) -> Iterator[str]:
    """The sha256 of each job's file, in order, as each is solved."""
    if workers <= 1:
        yield from map(_solve_chunk, jobs)
        return
    with spawned_pool(workers) as pool:
        yield from pool.map(_solve_chunk, jobs)


def _finished_round(files: Ledger, r: int, dim: int
                    ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]] | None:
    """Round r's θ (`dim` weights), states and log record when both its files are listed and
    whole (each checked, so an edited one is refused); None when it is to be (re)computed."""
    states = files.read(f"states-{r}.npy")
    done = read_round(files, r, dim) if states is not None else None
    if states is None or done is None:
        return None
    return done[0], npy_from_bytes(states, str(files.folder / f"states-{r}.npy")), done[1]


def _round(r: int, theta: np.ndarray | None, before: np.ndarray | None, lattice: Any,
           seeds: np.ndarray, d: DistillConfig, net_scale: float, family: Any, sim: Any,
           files: Ledger, eval_seeds: np.ndarray | None, say: Any,
           cache: dict[tuple[int, ...], np.ndarray]
           ) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    """One round: gather states, label, render, fit; its states and θ (with its log record)
    are listed in the ledger, θ last, and a line goes to rounds.jsonl for people. `before` is
    the last round's states (seed, step, ix, iz columns) as stored."""
    import torch

    from pacplan.worlds.uav import distill as dl

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    rng = np.random.default_rng([d.seed, r])
    if r == 0:
        plan = lattice.plan()
        states = dl.States.concat([dl.visited(seeds, plan, lattice),
                                   dl.free_states(lattice, d.free_states, rng)])
        torch.manual_seed(d.seed)
        theta = dl.flat_weights(dl.student(family), family)
    else:
        assert theta is not None and before is not None
        res = sim.rollout(theta[None], seeds, net_scale=net_scale, family=family)
        states = dl.States.concat([dl.States(*(before[:, i] for i in range(4))),
                                   dl.visited(seeds, res.prims[:, 0], lattice)])
    states = states.unique()
    stored = np.stack([states.seed, states.step, states.ix, states.iz], 1)
    files.write(f"states-{r}.npy", npy_bytes(stored))
    target = dl.preferences(lattice, states, d.target_temperature)
    images = dl.render(sim, states, cache)
    t1 = time.perf_counter()
    theta, losses = dl.fit(theta, images, target, epochs=d.epochs, lr=d.lr, batch=d.batch,
                           temperature=d.temperature, net_scale=net_scale, seed=d.seed + r,
                           family=family)
    rec: dict[str, Any] = {"round": r, "states": len(states), "loss": losses,
                           "agreement": dl.agreement(theta, images, target, net_scale, family),
                           "seconds_data": round(t1 - t0, 1),
                           "seconds_fit": round(time.perf_counter() - t1, 1)}
    if eval_seeds is not None:
        t2 = time.perf_counter()
        rec["eval_cost"] = float(sim.rollout(theta[None], eval_seeds, net_scale=net_scale,
                                             family=family).costs.mean())
        rec["eval_envs"] = len(eval_seeds)
        rec["seconds_eval"] = round(time.perf_counter() - t2, 1)
    write_round(files, r, theta, rec)
    say(f"distill round {r}: {len(states)} states, agreement {rec['agreement']:.3f}"
        + (f", held-out cost {rec['eval_cost']:.4f}" if "eval_cost" in rec else ""))
    return theta, stored, rec
