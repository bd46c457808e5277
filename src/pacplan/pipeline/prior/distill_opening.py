"""The climbing-opening teacher's rounds (`distill.teacher: quadruped-opening`; the distillation
stage, `pacplan.pipeline.prior.distill`, runs them).

It refines a prior already trained (`distill.opening.base`), where that prior stalls: in front of
a first tent in the world's steep stratum (`pacplan.worlds.quadruped.opening`). Rounds:

1. round 0: the rule walks the first `opening.steep` steep and `opening.ordinary` other
   terrains of seeds.prior, the climbing opening on steep ones and the base prior's mean
   elsewhere; every decision state is kept with the rule's target η (`opening-0/<seed>.npz`,
   a chunk of terrains each);
2. round r ≥ 1: the student of round r − 1 walks the same terrains and the rule labels every
   state it reaches (DAgger);
3. after each round the net is refitted from the base prior's mean on all rounds' states and
   walks `opening.eval_steep` steep and `opening.eval_ordinary` other terrains of
   seeds.prior_eval: its cost there, the two mixed at the stratum's share, chooses the round.

The chosen round's θ is kept in float64 as fitted, so a prior with the base's σ
(`es.iterations: 0`, `es.init_var` the base prior) carries it exactly. Every file is written
atomically and listed with its sha256 in the folder's ledger before it is trusted, so a killed
run resumes at the first unlisted chunk and gives the same weights to the bit (an episode does
not depend on the worker that walks it; each fit is full-batch L-BFGS on one thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import OpeningConfig, RunConfig
from pacplan.errors import PacplanError
from pacplan.io.files import (
    atomic_write_bytes,
    npz_arrays,
    npz_bytes,
    read_file_bytes,
    sha256_bytes,
)
from pacplan.pipeline.execution.chunks import Ledger
from pacplan.pipeline.execution.parallel import spawned_pool
from pacplan.pipeline.prior.distill_store import read_round, write_round
from pacplan.validation import check_teacher_seeds

KIND = "quadruped-opening"
TEACHER = "climbing opening on steep first tents (pacplan.worlds.quadruped.opening)"
FILES = r"opening-\d+/\d+\.npz|base-eval\.json"
CHUNK = 8  # terrains per labels file (one worker task)
FIGURE = "rounds.png"  # each round's held-out costs, beside the stage's files
SHARE_SPAN = 100_000  # seeds (from 0) over which the stratum's share is counted
NOT_ITS_OWN = ("envs", "free_states", "epochs", "lr", "batch", "temperature",
               "target_temperature", "clear_cap", "eval_envs", "seed")
"""distill settings of the other teachers: this one has its own (`distill.opening`)."""


def settings(cfg: RunConfig) -> OpeningConfig:
    """distill.opening, or a one-line refusal when the section is missing."""
    assert cfg.distill is not None
    if cfg.distill.opening is None:
        raise PacplanError(f"distill.teacher {KIND} needs a distill.opening section naming its "
                           "base prior (distill.opening.base)")
    return cfg.distill.opening


def check_request(cfg: RunConfig) -> None:
    """The one-line refusals, before any work: a missing section or base prior, settings of
    other teachers, held-out terrains missing, terrains the teacher must not see, a world
    without the rule's stratum, too few terrains of a kind."""
    o = settings(cfg)
    d = cfg.distill
    assert d is not None
    given = d.changed(NOT_ITS_OWN)
    if given:
        raise PacplanError(f"distill.{given[0]} is not a setting of the {KIND} teacher; its "
                           "own are in distill.opening (remove it)")
    if cfg.seeds.prior_eval is None:
        raise PacplanError(f"the {KIND} teacher chooses its round on seeds.prior_eval terrains;"
                           " the config has none")
    forbidden = {"cert": cfg.seeds.cert, "test": cfg.seeds.test}
    check_teacher_seeds(cfg.seeds.prior, forbidden, "prior-training")
    check_teacher_seeds(cfg.seeds.prior_eval, forbidden, "prior-training or held-out")
    base_prior(o)
    world = _world(cfg)
    try:
        terrains(world, cfg.seeds.prior, o.steep, o.ordinary, "seeds.prior")
        terrains(world, cfg.seeds.prior_eval, o.eval_steep, o.eval_ordinary, "seeds.prior_eval")
    finally:
        world.close()


def base_prior(o: OpeningConfig) -> tuple[np.ndarray, bytes]:
    """The base prior's mean (float64) and the file's bytes, checked (a prior of the quadruped
    net's size)."""
    from pacplan.es.checkpoint import read_prior
    from pacplan.worlds.quadruped.policy import POLICY_DIM

    data = read_file_bytes(o.base, "distill.opening.base")
    try:
        prior = read_prior(data, o.base)
    except PacplanError as exc:
        raise PacplanError(f"distill.opening.base: {exc}") from None
    if prior.mu.size != POLICY_DIM:
        raise PacplanError(f"distill.opening.base {o.base}: a prior of {prior.mu.size} weights, "
                           f"not the quadruped net's {POLICY_DIM}")
    return np.asarray(prior.mu, np.float64), data


def inputs(cfg: RunConfig) -> dict[str, Any]:
    """What the taught θ depends on beside the distill settings: the world, the base prior by
    content (not where it lives) and the rule."""
    from pacplan.worlds.quadruped.opening import OpeningRule

    _, data = base_prior(settings(cfg))
    return {"world": {k: v for k, v in cfg.world.options.items() if k != "threads"},
            "base_sha256": sha256_bytes(data), "rule": repr(OpeningRule())}


def stamp_settings(d: dict[str, Any]) -> dict[str, Any]:
    """The distill settings as stamped: this teacher's own (the others' are refused unless at
    their defaults), the base prior counted by content (`inputs`)."""
    return {k: v for k, v in d.items() if k not in NOT_ITS_OWN}


def terrains(world: Any, seeds: tuple[int, int], steep: int, ordinary: int, role: str
             ) -> tuple[np.ndarray, np.ndarray]:
    """The first `steep` seeds of [lo, hi) in the rule's stratum and the first `ordinary`
    others, as (seeds, in_stratum)."""
    from pacplan.worlds.base import stratum_members
    from pacplan.worlds.quadruped.opening import OpeningRule

    all_seeds = np.arange(int(seeds[0]), int(seeds[1]), dtype=np.int64)
    member = stratum_members(world, OpeningRule().stratum, all_seeds)
    a, b = all_seeds[member][:steep], all_seeds[~member][:ordinary]
    if a.size < steep or b.size < ordinary:
        raise PacplanError(f"{role} {list(seeds)} holds {a.size} steep and {b.size} other "
                           f"terrains; distill.opening asks for {steep} and {ordinary}")
    return (np.concatenate([a, b]),
            np.concatenate([np.ones(a.size, bool), np.zeros(b.size, bool)]))


def _world(cfg: RunConfig) -> Any:
    from pacplan.worlds.base import make_world

    return make_world(cfg.world.name, **cfg.world.options)


def rounds(cfg: RunConfig, files: Ledger, say: Callable[[str], None]
           ) -> tuple[np.ndarray, list[dict[str, Any]], int, dict[str, Any]]:
    """Run (or resume) rounds 0..R; the chosen round's θ (float64), every round's record, the
    chosen round and the base prior's own held-out record (round −1)."""
    from pacplan.worlds.base import stratum_members
    from pacplan.worlds.quadruped.opening import OpeningRule, OpeningStates, fit
    from pacplan.worlds.quadruped.policy import POLICY_DIM

    d, o = cfg.distill, settings(cfg)
    assert d is not None and cfg.seeds.prior_eval is not None
    base, _ = base_prior(o)
    world = _world(cfg)
    try:
        seeds, flags = terrains(world, cfg.seeds.prior, o.steep, o.ordinary, "seeds.prior")
        held = terrains(world, cfg.seeds.prior_eval, o.eval_steep, o.eval_ordinary,
                        "seeds.prior_eval")
        share = float(stratum_members(world, OpeningRule().stratum,
                                      np.arange(SHARE_SPAN)).mean())
    finally:
        world.close()
    job = _Job(cfg.world.name, dict(cfg.world.options), base, d.workers)
    # a round is trusted only as a chain: from the first unfinished one, every round is redone
    done = [read_round(files, r, POLICY_DIM, exact=True) for r in range(d.rounds + 1)]
    first = next((r for r, f in enumerate(done) if f is None), d.rounds + 1)
    thetas = [f[0] for f in done[:first] if f is not None]
    records = [f[1] for f in done[:first] if f is not None]
    for r in range(first, d.rounds + 1):
        t0 = time.perf_counter()
        parts = [_labels(job, files, q, thetas[q - 1] if q else None, seeds, flags, say)
                 for q in range(r + 1)]
        data = OpeningStates.concat([p[0] for p in parts])
        theta, loss = fit(base, base, data, opening_weight=o.opening_weight, pull=o.pull,
                          iterations=o.iterations)
        rec = {"round": r, "states": len(data), "loss": loss,
               "walk_cost": float(parts[-1][1].mean()),
               **_held_out(job, theta, *held, share), "eval_envs": int(held[0].size),
               "seconds": round(time.perf_counter() - t0, 1)}
        write_round(files, r, theta, rec)
        say(f"distill round {r}: {len(data)} states, held-out cost {rec['eval_cost']:.4f} "
            f"(steep {rec['eval_steep']:.4f}, other {rec['eval_other']:.4f})")
        thetas.append(theta)
        records.append(rec)
    base_rec = _base_held_out(job, files, *held, share)
    chosen = int(np.argmin([rec["eval_cost"] for rec in records]))
    _figure(files.folder / FIGURE, [base_rec, *records])
    return thetas[chosen], records, chosen, base_rec


class _Job:
    """What every walk needs: the world (name and options), the base prior's mean, the
    workers."""

    def __init__(self, world: str, options: dict[str, Any], base: np.ndarray, workers: int
                 ) -> None:
        self.world = (world, options)
        self.base, self.workers = base, workers

    def map(self, fn: Callable[[Any], Any], tasks: list[Any]) -> Iterator[Any]:
        """fn of each task, in order, each as soon as it and those before it are done (so a
        caller lists every finished chunk before a kill can take it)."""
        if self.workers <= 1 or len(tasks) <= 1:
            yield from map(fn, tasks)
            return
        with spawned_pool(self.workers) as pool:
            yield from pool.map(fn, tasks)


_KEYS = ("seed", "primitive", "depth", "proprio", "target", "opens", "cost")


def _labels(job: _Job, files: Ledger, r: int, walker: np.ndarray | None, seeds: np.ndarray,
            flags: np.ndarray, say: Callable[[str], None]) -> tuple[Any, np.ndarray]:
    """Round r's states and walk costs: listed chunk files checked, the rest walked."""
    from pacplan.worlds.quadruped.opening import OpeningStates

    starts = range(0, seeds.size, CHUNK)
    names = [f"opening-{r}/{int(seeds[i])}.npz" for i in starts]
    todo = [(i, n) for i, n in zip(starts, names, strict=True) if files.read(n) is None]
    (files.folder / f"opening-{r}").mkdir(parents=True, exist_ok=True)
    if todo:
        say(f"distill round {r}: {'the rule' if walker is None else 'the student'} walks "
            f"{sum(min(CHUNK, seeds.size - i) for i, _ in todo)} terrains")
        tasks = [(job.world, job.base, walker, [int(s) for s in seeds[i:i + CHUNK]],
                  [bool(f) for f in flags[i:i + CHUNK]], str(files.folder / n))
                 for i, n in todo]
        for (_, name), sha in zip(todo, job.map(_walk_chunk, tasks), strict=True):
            files.record(name, sha)  # after the file is whole: a kill leaves it unlisted
    parts, costs = [], []
    for name in names:
        a = npz_arrays(files.checked(name), str(files.folder / name), _KEYS, "labels")
        parts.append(OpeningStates(*(a[k] for k in OpeningStates.__dataclass_fields__)))
        costs.append(a["cost"])
    return OpeningStates.concat(parts), np.concatenate(costs)


def _walk_chunk(task: tuple[tuple[str, dict[str, Any]], np.ndarray, np.ndarray | None,
                            list[int], list[bool], str]) -> str:
    """Walk and label one chunk of terrains into its file; its sha256 (a worker process)."""
    import torch

    from pacplan.worlds.base import make_world
    from pacplan.worlds.quadruped.opening import OpeningRule, OpeningStates, walk_and_label

    torch.set_num_threads(1)
    (name, options), base, walker, seeds, flags, path = task
    world = make_world(name, **options)
    parts, costs = [], []
    for seed, flag in zip(seeds, flags, strict=True):
        states, cost = walk_and_label(world, OpeningRule(), base, walker, seed, flag)
        parts.append(states)
        costs.append(cost)
    world.close()
    blob = npz_bytes({**OpeningStates.concat(parts).arrays(),
                      "cost": np.array(costs, np.float64)})
    atomic_write_bytes(path, blob)
    return sha256_bytes(blob)


def _walk_costs(task: tuple[tuple[str, dict[str, Any]], np.ndarray, list[int]]) -> list[float]:
    """The net's cost on each seed (a worker process)."""
    from pacplan.worlds.base import make_world

    (name, options), theta, seeds = task
    world = make_world(name, **options)
    out = [float(world.rollout(theta.astype(np.float32), s).cost) for s in seeds]
    world.close()
    return out


def _held_out(job: _Job, theta: np.ndarray, seeds: np.ndarray, flags: np.ndarray,
              share: float) -> dict[str, float]:
    """The net's held-out costs: steep, other, and the two mixed at the stratum's share."""
    n = max(1, job.workers) * 4
    got = list(job.map(_walk_costs, [(job.world, theta, [int(s) for s in seeds[i::n]])
                                     for i in range(n)]))
    cost = np.empty(seeds.size)
    for i, part in enumerate(got):
        cost[i::n] = part
    steep, other = float(cost[flags].mean()), float(cost[~flags].mean())
    return {"eval_steep": steep, "eval_other": other,
            "eval_cost": share * steep + (1.0 - share) * other}


def _base_held_out(job: _Job, files: Ledger, seeds: np.ndarray, flags: np.ndarray,
                   share: float) -> dict[str, Any]:
    """The base prior's mean on the held-out terrains (listed once, as the rounds are)."""
    import json

    name = "base-eval.json"
    got = files.read(name)
    if got is not None:
        return dict(json.loads(got))
    rec = {"round": -1, **_held_out(job, job.base, seeds, flags, share)}
    files.write(name, json.dumps(rec).encode())
    return rec


def _figure(path: Path, records: list[dict[str, Any]]) -> None:
    """Each round's held-out costs beside the base prior's (round −1): steep, other, mixed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rounds_ = [r["round"] for r in records]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, label in (("eval_steep", "first tent ≥ 20°"), ("eval_other", "other terrains"),
                       ("eval_cost", "mixed at the stratum's share")):
        ax.plot(rounds_, [r[key] for r in records], marker="o", label=label)
    ax.set_xticks(rounds_, ["base" if r < 0 else str(r) for r in rounds_])
    ax.set_xlabel("round (base: the prior it starts from)")
    ax.set_ylabel("mean cost, held-out choosing terrains")
    ax.set_title("Teaching the climbing opening")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
