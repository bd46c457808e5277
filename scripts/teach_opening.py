"""Teach a paper-code quadruped prior to open steep first tents (`worlds.quadruped.opening`).

    python scripts/teach_opening.py --out runs/quadruped-paper-code-opening
        [--base src/pacplan/presets/priors/quadruped-paper-code.safetensors]
        [--steep 400] [--ordinary 300] [--rounds 1] [--workers 2]

Rounds, each resumable after a kill (every file listed with its sha256 in the folder's
ledger.jsonl before it is trusted, as a distillation's are):

1. round 0: the rule walks the first `--steep` steep and `--ordinary` other terrains of
   `--seeds` (prior-training seeds): the climbing opening on steep ones, the base prior's mean
   elsewhere; every decision state is kept with the rule's target η (`round-0/<seed>.npz`);
2. round r ≥ 1: the student of round r − 1 walks the same terrains and the rule labels every
   state it reaches (DAgger);
3. after each round the net is refitted from the base prior's mean on all rounds' states
   (`round-r/theta.npy`) and walks `--eval-steep` steep and `--eval-ordinary` other terrains of
   the held-out `--eval-seeds` (the paper-code recipes' seeds.prior_eval, neither certification
   nor test terrains): its cost there, weighted by the steep stratum's share, chooses the round.

The prior written (`prior.safetensors`) is the chosen round's weights with the base prior's σ,
its metadata recording how it was taught; `metrics.jsonl` holds one line per round (the base
prior's own held-out costs first, as round −1) and `figures/training.png` draws them. Runs in
PyBullet, the certificate's engine.

Measured (`--rounds 1 --workers 2`, two cores shared with other jobs, 2026-12-02): round 0,
700 rule episodes, 13,003 states, 1098 s; round 1, 700 student episodes, 25,322 states, 1925 s;
on the 120 choosing terrains the base prior costs 0.209, round 0 0.149 and round 1 0.107, which
is chosen (benchmarks/data/quadruped-paper-code-opening-metrics.jsonl).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.cli.output import sigterm_raises
from pacplan.es.checkpoint import load_prior, save_prior
from pacplan.io.files import (
    atomic_write_bytes,
    atomic_write_json,
    npy_bytes,
    npz_arrays,
    npz_bytes,
    read_file_bytes,
    sha256_bytes,
)
from pacplan.pipeline.execution.chunks import Ledger
from pacplan.pipeline.execution.parallel import spawned_pool
from pacplan.presets import seed_ranges
from pacplan.worlds.base import stratum_members
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.opening import OpeningRule, OpeningStates, fit, walk_and_label

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "src" / "pacplan" / "presets" / "priors" / "quadruped-paper-code.safetensors"
WORLD = {"variant": "paper-code", "physics": "bullet"}  # the certificate's engine
CHUNK = 8  # terrains per labels file (one worker task)
SHARE_SPAN = 100_000  # seeds over which the steep stratum's share is counted
KEYS = (*OpeningStates.__dataclass_fields__, "cost")


def pick(world: QuadrupedWorld, lo: int, hi: int, steep: int, ordinary: int
         ) -> tuple[np.ndarray, np.ndarray]:
    """The first `steep` seeds of [lo, hi) in the steep stratum and the first `ordinary` others,
    as (seeds, in_stratum)."""
    seeds = np.arange(lo, hi, dtype=np.int64)
    member = stratum_members(world, "steep", seeds)
    a, b = seeds[member][:steep], seeds[~member][:ordinary]
    if a.size < steep or b.size < ordinary:
        raise SystemExit(f"error: [{lo}, {hi}) holds {a.size} steep and {b.size} other seeds; "
                         f"asked for {steep} and {ordinary}")
    return np.concatenate([a, b]), np.concatenate([np.ones(a.size, bool), np.zeros(b.size, bool)])


def check_seeds(lo: int, hi: int, role: str) -> None:
    """Refuse teaching or choosing terrains that any quadruped config certifies or tests on."""
    for what, (a, b) in seed_ranges("quadruped").items():
        if (what.endswith(".cert") or what.endswith(".test")) and a < hi and lo < b:
            raise SystemExit(f"error: {role} seeds [{lo}, {hi}) overlap {what} [{a}, {b})")


def _walk_chunk(task: tuple[dict[str, Any], str, np.ndarray | None, list[int], list[bool], str]
                ) -> str:
    """Walk and label one chunk of terrains into its file; its sha256 (a worker process)."""
    import torch

    torch.set_num_threads(1)
    options, base_path, walker, seeds, flags, path = task
    base, _ = load_prior(base_path)
    world = QuadrupedWorld(**options)
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


def _walk_costs(task: tuple[dict[str, Any], np.ndarray, list[int]]) -> list[float]:
    options, theta, seeds = task
    world = QuadrupedWorld(**options)
    out = [float(world.rollout(theta.astype(np.float32), s).cost) for s in seeds]
    world.close()
    return out


def _map(fn: Any, tasks: list[Any], workers: int) -> list[Any]:
    if workers <= 1 or len(tasks) <= 1:
        return [fn(t) for t in tasks]
    with spawned_pool(workers) as pool:
        return list(pool.map(fn, tasks))


def labels(files: Ledger, options: dict[str, Any], r: int, base: str, walker: np.ndarray | None,
           seeds: np.ndarray, flags: np.ndarray, workers: int
           ) -> tuple[OpeningStates, np.ndarray]:
    """Round r's states: listed chunk files checked, the rest walked."""
    names = [f"round-{r}/{int(seeds[i])}.npz" for i in range(0, seeds.size, CHUNK)]
    todo = [(i, n) for i, n in zip(range(0, seeds.size, CHUNK), names, strict=True)
            if files.read(n) is None]
    (files.folder / f"round-{r}").mkdir(parents=True, exist_ok=True)
    if todo:
        print(f"round {r}: {'the rule' if walker is None else 'the student'} walks "
              f"{sum(min(CHUNK, seeds.size - i) for i, _ in todo)} terrains", file=sys.stderr)
        tasks = [(options, base, walker, [int(s) for s in seeds[i:i + CHUNK]],
                  [bool(f) for f in flags[i:i + CHUNK]], str(files.folder / n)) for i, n in todo]
        for (_, name), sha in zip(todo, _map(_walk_chunk, tasks, workers), strict=True):
            files.record(name, sha)
    parts, costs = [], []
    for name in names:
        data = files.read(name)
        assert data is not None
        a = npz_arrays(data, str(files.folder / name), KEYS, "labels")
        parts.append(OpeningStates(*(a[k] for k in OpeningStates.__dataclass_fields__)))
        costs.append(a["cost"])
    return OpeningStates.concat(parts), np.concatenate(costs)


def evaluate(options: dict[str, Any], theta: np.ndarray, seeds: np.ndarray, flags: np.ndarray,
             share: float, workers: int) -> dict[str, float]:
    """The net's held-out costs: steep, other, and their mix at the stratum's share."""
    chunks = [(options, theta, [int(s) for s in seeds[i::workers * 4]])
              for i in range(workers * 4)]
    got = _map(_walk_costs, chunks, workers)
    cost = np.empty(seeds.size)
    for i, part in enumerate(got):
        cost[i::workers * 4] = part
    steep, other = float(cost[flags].mean()), float(cost[~flags].mean())
    return {"eval_steep": steep, "eval_other": other,
            "eval_cost": share * steep + (1.0 - share) * other}


def base_costs(files: Ledger, options: dict[str, Any], base: np.ndarray, seeds: np.ndarray,
               flags: np.ndarray, share: float, workers: int) -> dict[str, Any]:
    """The base prior's mean on the choosing terrains (listed once, as the rounds are)."""
    name = "base-eval.json"
    got = files.read(name)
    if got is not None:
        return dict(json.loads(got))
    rec = {"round": -1, **evaluate(options, base, seeds, flags, share, workers)}
    files.write(name, json.dumps(rec).encode())
    return rec


def write_metrics(out: Path, records: list[dict[str, Any]]) -> None:
    """metrics.jsonl (one line a round, the base first) and figures/training.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    (out / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    rounds = [r["round"] for r in records]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, label in (("eval_steep", "first tent ≥ 20°"), ("eval_other", "other terrains"),
                       ("eval_cost", "mixed at the stratum's share")):
        ax.plot(rounds, [r[key] for r in records], marker="o", label=label)
    ax.set_xticks(rounds, ["base" if r < 0 else str(r) for r in rounds])
    ax.set_xlabel("round (base: the prior it starts from)")
    ax.set_ylabel("mean cost, held-out choosing terrains")
    ax.set_title("Teaching the climbing opening (PyBullet, paper-code)")
    ax.legend()
    fig.tight_layout()
    (out / "figures").mkdir(exist_ok=True)
    fig.savefig(out / "figures" / "training.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--base", type=Path, default=BASE)
    ap.add_argument("--seeds", type=int, nargs=2, default=(0, 100_000))
    ap.add_argument("--steep", type=int, default=400)
    ap.add_argument("--ordinary", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--eval-seeds", type=int, nargs=2, default=(300_000, 300_500))
    ap.add_argument("--eval-steep", type=int, default=40)
    ap.add_argument("--eval-ordinary", type=int, default=80)
    ap.add_argument("--pull", type=float, default=1e-4)
    ap.add_argument("--opening-weight", type=float, default=3.0)
    ap.add_argument("--iterations", type=int, default=500)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--physics", choices=("bullet", "mujoco"), default=WORLD["physics"],
                    help="the engine (the twin, mujoco, for a quick check only)")
    args = ap.parse_args(argv)
    # SIGTERM as an exception in the driver: the worker pool then kills its workers (they leave
    # signals to the driver), and no worker outlives a stopped teaching; the handler is put
    # back afterwards (main also runs inside tests)
    with sigterm_raises(lambda _signum: SystemExit(143)):
        teach(args)


def teach(args: argparse.Namespace) -> None:
    """Every round (resumed), the choice among them and the prior file (the module docstring)."""
    options = {**WORLD, "physics": args.physics}
    check_seeds(*args.seeds, "teaching")
    check_seeds(*args.eval_seeds, "choosing")
    world = QuadrupedWorld(**options)
    seeds, flags = pick(world, *args.seeds, args.steep, args.ordinary)
    eval_seeds, eval_flags = pick(world, *args.eval_seeds, args.eval_steep, args.eval_ordinary)
    share = float(stratum_members(world, "steep", np.arange(SHARE_SPAN)).mean())
    base_bytes = read_file_bytes(args.base)
    base_mu, base_logvar = load_prior(args.base)
    inputs = {"base_sha256": sha256_bytes(base_bytes), "world": WORLD, "rule": repr(OpeningRule()),
              **{k: v for k, v in vars(args).items() if k not in ("out", "base", "rounds",
                                                                 "workers", "physics")}}
    if args.physics != WORLD["physics"]:
        inputs["world"] = options
    inputs = json.loads(json.dumps(inputs, default=list))
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = args.out / "inputs.json"
    if stamp.is_file() and json.loads(stamp.read_text()) != inputs:
        raise SystemExit(f"error: {args.out} was taught with other inputs ({stamp}); use a new "
                         "--out")
    atomic_write_json(stamp, inputs)
    files = Ledger(args.out, "file", lambda e: True, "file")
    records: list[dict[str, Any]] = []
    thetas: list[np.ndarray] = []
    for r in range(args.rounds + 1):
        t0 = time.perf_counter()
        parts = [labels(files, options, q, str(args.base), thetas[q - 1] if q else None, seeds,
                        flags, args.workers) for q in range(r + 1)]
        data = OpeningStates.concat([p[0] for p in parts])
        name = f"round-{r}/theta.npy"
        got = files.read(name)
        if got is None:
            theta, loss = fit(base_mu, base_mu, data, opening_weight=args.opening_weight,
                              pull=args.pull, iterations=args.iterations)
            rec = {"round": r, "states": len(data), "loss": loss,
                   "walk_cost": float(parts[-1][1].mean()),
                   **evaluate(options, theta, eval_seeds, eval_flags, share, args.workers),
                   "seconds": round(time.perf_counter() - t0, 1)}
            files.write(name, npy_bytes(theta), record=rec)
        else:
            theta = np.load(io.BytesIO(got), allow_pickle=False)
            rec = files.entries[name]["record"]
        print(json.dumps(rec), file=sys.stderr)
        thetas.append(theta)
        records.append(rec)
    base_rec = base_costs(files, options, base_mu, eval_seeds, eval_flags, share, args.workers)
    write_metrics(args.out, [base_rec, *records])
    chosen = int(np.argmin([rec["eval_cost"] for rec in records]))
    record = {"teacher": "climbing opening on steep first tents "
                         "(pacplan.worlds.quadruped.opening)",
              "base_sha256": inputs["base_sha256"], "chosen_round": chosen, "rounds": records,
              "base_eval": {k: v for k, v in base_rec.items() if k.startswith("eval_")},
              "seeds": list(args.seeds), "terrains": int(seeds.size), "steep_share": share}
    save_prior(args.out / "prior.safetensors", thetas[chosen], base_logvar, iteration=0,
               seeds=list(args.seeds), distill=record,
               world={"name": "quadruped", "options": options})
    print(json.dumps({"prior": str(args.out / "prior.safetensors"), **record}))


if __name__ == "__main__":
    main()
