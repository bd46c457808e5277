"""The quadruped's distillation rounds (`pacplan.pipeline.prior.distill` runs them for the quadruped
world).

- round 0: the look-ahead teacher (`worlds.quadruped.teacher`) walks `distill.envs`
  prior-training terrains; every decision state is kept with its 12 candidates' scores
  (`labels-0/<first seed>.npz`, a chunk of terrains each) and the net, started at the best
  constant gait, is fitted to them (behaviour cloning on the scores: the expected look-ahead
  score of the gait it outputs is maximised, `worlds.quadruped.distill.fit`);
- rounds 1..R: the student of the round before walks the same terrains, the teacher scores every
  state it reaches (DAgger), and the net is refit on all rounds' states from the last weights.

Every file is written atomically and listed with its sha256 in the folder's ledger before it is
trusted (`pacplan.pipeline.execution.chunks.Ledger`), so a killed run resumes at the first unlisted
chunk and reproduces every weight to the bit (each terrain's episode is independent of the worker
that walks it). The teacher sees only seeds.prior; the stage refuses, before any work, a world the
teacher cannot look ahead in and teacher seeds overlapping seeds.cert / seeds.test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from pacplan.config import RunConfig
from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_bytes, npz_arrays, npz_bytes, sha256_bytes
from pacplan.pipeline.execution.chunks import Ledger
from pacplan.pipeline.execution.parallel import spawned_pool
from pacplan.pipeline.prior.distill_store import read_round, write_round

TEACHER = "quadruped look-ahead in MuJoCo (pacplan.worlds.quadruped.teacher)"
FILES = r"labels-\d+/\d+\.npz"
CHUNK = 4  # terrains per labels file (one worker task)
UAV_ONLY = ("free_states", "clear_cap", "temperature", "target_temperature")
KERNEL = 0.02
"""Width (in η², adjacent candidates are ≥ 0.0625 apart) of the softmax that weights each
candidate's score by its nearness to the net's η in the fit (`worlds.quadruped.distill.fit`)."""
_KEYS = ("seed", "primitive", "depth", "proprio", "scores", "cost")


def teacher_name(options: dict[str, Any]) -> str:
    """What taught the prior, as its record and metadata say: the engine the teacher looked
    ahead in (MuJoCo keeps the name priors taught before PyBullet could carry)."""
    default = "mujoco" if options.get("variant") == "paper-code" else "bullet"
    if options.get("physics", default) == "bullet":
        return TEACHER.replace("in MuJoCo", "in PyBullet")
    return TEACHER


def check_request(cfg: RunConfig, seeds: tuple[int, int]) -> None:
    """The one-line refusals, before any work: a world the teacher cannot see, seeds it must
    not see, settings that only the UAV's teacher has."""
    from pacplan.worlds.quadruped.teacher import check_teacher_request

    check_teacher_request(cfg.world.name, cfg.world.options, seeds,
                          {"cert": cfg.seeds.cert, "test": cfg.seeds.test})
    d = cfg.distill
    assert d is not None
    given = d.changed(UAV_ONLY)
    if given:
        raise PacplanError(f"distill.{given[0]} is a setting of the UAV's teacher; the "
                           f"quadruped's has none (remove it)")


def rounds(cfg: RunConfig, seeds: np.ndarray, eval_seeds: np.ndarray | None, files: Ledger,
           say: Callable[[str], None]) -> tuple[np.ndarray, list[dict[str, Any]], int]:
    """Run (or resume) rounds 0..R; the chosen round's θ, every round's record and the chosen
    round: the one whose net walked the held-out prior_eval terrains best (the first of equal
    costs), else the last. Why choose: a refit on more states is not always a better walker
    (measured: 0.272 after round 2, 0.36–0.56 after round 3 on the same 100 terrains), and
    prior_eval terrains are neither certification nor test terrains, so choosing there is free."""
    from pacplan.worlds.quadruped.policy import POLICY_DIM

    d = cfg.distill
    assert d is not None
    done = [read_round(files, r, POLICY_DIM) for r in range(d.rounds + 1)]
    first = next((r for r, f in enumerate(done) if f is None), d.rounds + 1)
    kept = [f for f in done[:first] if f is not None]
    thetas, records = [f[0] for f in kept], [f[1] for f in kept]
    theta = thetas[-1] if thetas else None
    for r in range(first, d.rounds + 1):
        theta, rec = _round(cfg, r, theta, seeds, eval_seeds, files, say)
        thetas.append(theta)
        records.append(rec)
    costs = [rec.get("eval_cost") for rec in records]
    chosen = (int(np.argmin(costs)) if all(c is not None for c in costs)
              else len(records) - 1)
    return thetas[chosen], records, chosen


def start_theta() -> np.ndarray:
    """Where round 0's fit starts: the best constant gait (every weight 0 but the biases)."""
    from pacplan.worlds.quadruped.policy import gait_theta
    from pacplan.worlds.quadruped.teacher import BEST_CONSTANT_GAIT

    return gait_theta(BEST_CONSTANT_GAIT)


def _round(cfg: RunConfig, r: int, theta: np.ndarray | None, seeds: np.ndarray,
           eval_seeds: np.ndarray | None, files: Ledger, say: Callable[[str], None]
           ) -> tuple[np.ndarray, dict[str, Any]]:
    """Label round r's states (the teacher walks in round 0, the student after), refit on every
    round's states so far, and list the weights with the round's record."""
    from pacplan.worlds.quadruped.distill import Labelled, agreement, candidate_etas, fit
    from pacplan.worlds.quadruped.teacher import teacher_config

    d = cfg.distill
    assert d is not None
    t0 = time.perf_counter()
    walked = _labels(cfg, r, theta, seeds, files, say)
    t1 = time.perf_counter()
    parts = [walked] + [_load_labels(cfg, q, seeds, files) for q in range(r)]
    data = Labelled.concat([p[0] for p in parts])
    etas = candidate_etas(teacher_config(cfg.world.options.get("variant", "text")))
    start = start_theta() if theta is None else np.asarray(theta, dtype=np.float64)
    new, losses = fit(start, data, data.scores, etas, kernel=KERNEL, epochs=d.epochs, lr=d.lr,
                      batch=d.batch, seed=d.seed + r)
    rec: dict[str, Any] = {
        "round": r, "walker": "teacher" if r == 0 else "student",
        "walk_cost": float(np.mean(walked[1])), "states": len(data), "loss": losses,
        "agreement": agreement(new, walked[0], etas),
        "seconds_labels": round(t1 - t0, 1), "seconds_fit": round(time.perf_counter() - t1, 1),
    }
    if eval_seeds is not None:
        t2 = time.perf_counter()
        rec["eval_cost"] = float(_walk_costs(cfg, new, eval_seeds).mean())
        rec["eval_envs"] = len(eval_seeds)
        rec["seconds_eval"] = round(time.perf_counter() - t2, 1)
    theta32 = new.astype(np.float32)
    write_round(files, r, theta32, rec)
    say(f"distill round {r}: {len(data)} states, {rec['walker']} walked "
        f"{rec['walk_cost']:.4f}, agreement {rec['agreement']:.3f}"
        + (f", held-out cost {rec['eval_cost']:.4f}" if "eval_cost" in rec else ""))
    return theta32, rec


def _chunks(r: int, seeds: np.ndarray) -> list[tuple[list[int], str]]:
    return [([int(s) for s in seeds[i : i + CHUNK]], f"labels-{r}/{int(seeds[i])}.npz")
            for i in range(0, len(seeds), CHUNK)]


def _labels(cfg: RunConfig, r: int, theta: np.ndarray | None, seeds: np.ndarray, files: Ledger,
            say: Callable[[str], None]) -> tuple[Any, np.ndarray]:
    """Round r's labelled states and walk costs: listed chunks checked, the rest walked."""
    chunks = _chunks(r, seeds)
    todo = [(s, name) for s, name in chunks if files.read(name) is None]
    if todo:
        say(f"distill round {r}: the {'teacher' if r == 0 else 'student'} walks "
            f"{sum(len(s) for s, _ in todo)} terrains")
        student = None if theta is None else np.asarray(theta, dtype=np.float32)
        jobs = [((cfg.world.name, dict(cfg.world.options)), s, student, str(files.folder / name))
                for s, name in todo]
        for (_, name), sha in zip(todo, _walk_all(jobs, cfg.distill.workers), strict=True):
            files.record(name, sha)  # after the file is whole: a kill leaves it unlisted
    return _load_labels(cfg, r, seeds, files)


def _load_labels(cfg: RunConfig, r: int, seeds: np.ndarray, files: Ledger
                 ) -> tuple[Any, np.ndarray]:
    from pacplan.worlds.quadruped.distill import Labelled

    parts, costs = [], []
    for _, name in _chunks(r, seeds):
        data = files.read(name)
        if data is None:
            raise PacplanError(f"{files.folder / name}: round {r}'s labels are missing; the "
                               "rounds after it are recomputed when it is")
        a = npz_arrays(data, str(files.folder / name), _KEYS, "labels")
        parts.append(Labelled(a["seed"], a["primitive"], a["depth"], a["proprio"], a["scores"]))
        costs.append(a["cost"])
    return Labelled.concat(parts), np.concatenate(costs)


def _walk_chunk(args: tuple[tuple[str, dict[str, Any]], list[int], np.ndarray | None, str]
                ) -> str:
    """Walk one chunk of terrains, every state scored by the teacher, into its file (a worker
    process); returns the file's sha256, which the caller lists once the file is whole."""
    import torch

    from pacplan.worlds.base import make_world
    from pacplan.worlds.quadruped.distill import Labelled, label_episode
    from pacplan.worlds.quadruped.teacher import QuadrupedTeacher

    torch.set_num_threads(1)
    (name, options), seeds, student, path = args
    world = make_world(name, **options)
    teacher = QuadrupedTeacher(world)
    parts, costs = [], []
    for s in seeds:
        data, cost = label_episode(world, teacher, s, student)
        parts.append(data)
        costs.append(cost)
    world.close()
    arrays = Labelled.concat(parts).arrays()
    arrays["cost"] = np.array(costs, dtype=np.float64)
    blob = npz_bytes(arrays)
    atomic_write_bytes(path, blob)
    return sha256_bytes(blob)


def _walk_all(jobs: list[Any], workers: int) -> Iterator[str]:
    """The sha256 of each job's file, in order, as each is walked."""
    if workers <= 1:
        yield from map(_walk_chunk, jobs)
        return
    with spawned_pool(workers) as pool:
        yield from pool.map(_walk_chunk, jobs)


def _walk_costs(cfg: RunConfig, theta: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    """The student's cost on each of `seeds` (held out), walked by `distill.workers` threads."""
    from pacplan.worlds.base import make_world

    d = cfg.distill
    assert d is not None
    world = make_world(cfg.world.name, **{**cfg.world.options, "threads": d.workers})
    try:
        return world.costs(np.asarray(theta, dtype=np.float32)[None], seeds).ravel()
    finally:
        world.close()
