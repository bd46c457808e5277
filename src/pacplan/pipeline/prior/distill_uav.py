"""The UAV's distillation rounds (`pacplan.pipeline.prior.distill` runs them for the UAV world).

- lattices: the teacher (`worlds.uav.teacher`) solves `distill.envs` prior-training
  environments, chunk by chunk (`distill/lattice/<chunk>.npz`);
- round 0: behaviour cloning on the teacher's own plan states plus random collision-free
  reachable states; rounds 1..R: the student flies the same environments and every state it
  visits is relabelled by the teacher and added (DAgger), then the net is refit from the last
  round's weights.

Every lattice chunk and round's states and weights are written atomically and listed in the
folder's ledger before they are trusted (the stage's docstring says how a kill is survived).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from pacplan.config import DistillConfig, RunConfig
from pacplan.errors import PacplanError
from pacplan.io.files import (
    atomic_write_bytes,
    npy_bytes,
    npy_from_bytes,
    npz_arrays,
    npz_bytes,
    sha256_bytes,
)
from pacplan.pipeline.execution.chunks import Ledger
from pacplan.pipeline.execution.parallel import spawned_pool
from pacplan.pipeline.prior.distill_store import read_round, write_round

FILES = r"lattice/\d+\.npz|states-\d+\.npy"
_CHUNK = 16  # environments per lattice file


def check_request(cfg: RunConfig, seeds: tuple[int, int]) -> None:
    """The one-line refusals, before any work: teacher seeds it must not see, a simulator or
    world options it cannot plan in, an unknown policy family."""
    from pacplan.worlds.uav.teacher import check_teacher_request

    check_teacher_request(cfg.world.name, seeds, {"cert": cfg.seeds.cert, "test": cfg.seeds.test})
    if cfg.world.options.get("simulator", "batched") != "batched":
        raise PacplanError("distillation needs the batched UAV simulator (world option "
                           "simulator: batched)")
    policy_family_of(cfg)  # an unknown policy family or width, in one line
    extra = set(cfg.world.options) - {"simulator", "compile", "net_scale", "device", "policy",
                                      "policy_width"}
    if extra:
        raise PacplanError(f"the teacher plans only in the certified UAV world; options "
                           f"{sorted(extra)} change it")


def rounds(cfg: RunConfig, seeds: np.ndarray, eval_seeds: np.ndarray | None, files: Ledger,
           say: Any) -> tuple[np.ndarray, list[dict[str, Any]], float]:
    """The UAV's lattices and rounds (resumed from the first unfinished one): the last θ, every
    round's record and the seconds spent solving lattices in this call."""
    d = cfg.distill
    assert d is not None
    t0 = time.perf_counter()
    lattice = _lattices(seeds, d, files, say)
    t_lattice = time.perf_counter() - t0
    net_scale = float(cfg.world.options.get("net_scale", 5.0))
    family = policy_family_of(cfg)
    sim = _sim()
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


def policy_family_of(cfg: RunConfig) -> Any:
    """The UAV policy family the student is (world options policy, policy_width)."""
    from pacplan.worlds.uav.families import policy_family

    opts = cfg.world.options
    return policy_family(opts.get("policy", "paper"), opts.get("policy_width"))


def _sim() -> Any:
    from pacplan.worlds.uav.batched import BatchedSimulator

    return BatchedSimulator(compile=False)


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
