"""The UAV student's capacity curve: policy families fitted to the same teacher labels; ONE JSON.

    nice python benchmarks/uav_student_capacity.py [--families paper,conv1,conv4,conv16]
        [--envs 2000] [--rounds 0] [--eval-envs 500] [--epochs 10] [--workers 2]
        [--lr RECIPE'S] [--time-policies 50] [--time-envs 64]
        [--out runs/uav-capacity] [--save [PATH]]

Why: issue 52 says the paper's 13,943-weight net is the UAV student's limit, and asks for a
larger family sized by a measured curve: held-out cost against weights and against rollout
time, every size fitted on the same labels. Each family is one distillation stage of
`pacplan train-prior` (`pacplan.pipeline.prior.distill`), the uav-paper-net-prior recipe's settings
(Adam's step 0.003; the shipped uav-prior's is the same at width 4 and 0.001) with `--rounds` DAgger
rounds (0: behaviour cloning on the teacher's plan states and 24 random collision-free
reachable states per environment, the same states whatever the student), in its own folder
`--out/<family>`: resumable, and the teacher's lattices are solved once and shared (each
family's folder gets the first's lattice files with their ledger lines, which its own ledger
checks). With `--rounds` > 0 the later rounds' states are each student's own (DAgger), so only
round 0's labels are shared.

Per family: weights; held-out cost of the fitted net on `--eval-envs` environments of
seeds.prior_eval (300,000 on), with a 95 % interval (the mean ± 1.96 standard errors); its
agreement with the teacher on the training states; fit seconds; and milliseconds of simulator
time per rollout on the held-out environments, with its ratio to the paper's net measured in this
same run (`rollout_time_ratio`, 1 for the paper's net; the throughput ratio is its inverse),
timed as a certificate flies: `--time-policies` draws around the fitted net (its recipe's ES
init_var) on the first `--time-envs` held-out environments, one process, compiled.
`--save` writes benchmarks/data/uav-student-capacity.json (or PATH).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.execution.chunks import Ledger
from pacplan.pipeline.prior import distill as stage
from pacplan.worlds.uav import UAVWorld
from pacplan.worlds.uav.families import policy_family

ROOT = Path(__file__).resolve().parents[1]
SAVED = ROOT / "benchmarks" / "data" / "uav-student-capacity.json"
RECIPE = ROOT / "src" / "pacplan" / "presets" / "priors" / "uav-paper-net-prior.yaml"


def family_options(name: str) -> dict[str, Any]:
    """World options of a family named `paper` or `conv<width>` (e.g. conv8)."""
    if name == "paper":
        return {}
    if not name.startswith("conv") or not name[4:].isdigit():
        raise ValueError(f"--families: {name!r} is neither paper nor conv<width> (e.g. conv8)")
    options = {"policy": "conv", "policy_width": int(name[4:])}
    try:
        policy_family(**options)
    except PacplanError as exc:  # the family's own one-line refusal
        raise ValueError(f"--families: {exc}") from None
    return options


def config(name: str, args: argparse.Namespace) -> Any:
    """The uav-prior recipe, shortened to its distillation with this family's options."""
    import yaml

    recipe = yaml.safe_load(RECIPE.read_text())
    recipe["world"]["options"] = {**recipe["world"]["options"], **family_options(name)}
    # held-out flights are this benchmark's (compiled, timed), not the stage's
    recipe["distill"].update(envs=args.envs, rounds=args.rounds, epochs=args.epochs,
                             eval_envs=0, workers=args.workers)
    if args.lr is not None:
        recipe["distill"]["lr"] = args.lr
    return parse_config(recipe)


def share_lattices(source: Path, dest: Path) -> None:
    """Give `dest`'s distill folder the lattice files `source`'s ledger lists, listed in its own
    ledger with the same sha256 (read back and checked there like any listed file)."""
    src = Ledger(source, "file", lambda e: True, "distillation file")
    dst = Ledger(dest, "file", lambda e: True, "distillation file")
    (dest / "lattice").mkdir(parents=True, exist_ok=True)
    for name, entry in src.entries.items():
        if name.startswith("lattice/") and name not in dst.entries:
            shutil.copyfile(source / name, dest / name)
            dst.record(name, entry["sha256"])


def draws_around(theta: np.ndarray, var: float, k: int) -> np.ndarray:
    """k policies θ + √var·z (seed 0): what a run's m draws from a prior started here cost to
    fly (distinct policies, so their flights and images diverge as a certificate's do)."""
    z = np.random.default_rng(0).standard_normal((k, theta.size))
    return (theta + np.sqrt(var) * z).astype(np.float32)


def measure(name: str, args: argparse.Namespace, first: Path | None) -> dict[str, Any]:
    """Distil family `name` (resumed), then fly its net on the held-out environments."""
    cfg = config(name, args)
    run = Path(args.out) / name
    if first is not None and first != run / stage.DIR:
        share_lattices(first, run / stage.DIR)
    t0 = time.perf_counter()
    theta_file = stage.distill(cfg, run, log=lambda m: print(f"[{name}] {m}", file=sys.stderr,
                                                             flush=True))
    record = json.loads((run / stage.DIR / stage.RECORD).read_text())
    last = record["rounds_log"][-1]
    from safetensors.numpy import load_file

    theta = load_file(str(theta_file))["theta"]
    world = UAVWorld(simulator="batched", compile=True, **family_options(name))
    lo = int(cfg.seeds.prior_eval[0])
    seeds = np.arange(lo, lo + args.eval_envs, dtype=np.int64)
    costs = world.costs(theta[None], seeds)[:, 0]  # also warms (compiles) before timing
    draws = draws_around(theta, float(cfg.es.init_var), args.time_policies)
    timed = seeds[: args.time_envs]
    t1 = time.process_time()
    world.costs(draws, timed)
    cpu = time.process_time() - t1
    half = 1.96 * float(costs.std(ddof=1)) / np.sqrt(len(costs))
    return {"family": name, "weights": int(theta.size), "states": last["states"],
            "heldout_cost": round(float(costs.mean()), 4),
            "heldout_ci95": [round(float(costs.mean()) - half, 4),
                             round(float(costs.mean()) + half, 4)],
            "agreement": round(float(last["agreement"]), 4),
            "fit_seconds": sum(r["seconds_fit"] for r in record["rounds_log"]),
            "seconds_this_call": round(time.perf_counter() - t0, 1),
            "rollout_cpu_ms": round(1000 * cpu / (len(draws) * len(timed)), 3)}


def refuse(message: str) -> None:
    """Bad input: one `error:` line, exit 2, before any work."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--families", default="paper,conv1,conv4,conv16")
    ap.add_argument("--envs", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=0)
    ap.add_argument("--eval-envs", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=None, help="Adam's step (default: the recipe's)")
    ap.add_argument("--time-policies", type=int, default=50)
    ap.add_argument("--time-envs", type=int, default=64)
    ap.add_argument("--out", default=str(ROOT / "runs" / "uav-capacity"))
    ap.add_argument("--save", nargs="?", const=str(SAVED), default=None, metavar="PATH",
                    help=f"write the JSON there (default {SAVED.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.families.split(",") if n.strip()]
    try:  # every name checked before any work
        for name in names:
            family_options(name)
    except ValueError as exc:
        refuse(str(exc))
    if not names or len(set(names)) != len(names):
        refuse(f"--families: name each family once, got {args.families!r}")
    for flag, low in (("envs", 1), ("eval_envs", 2), ("epochs", 1), ("rounds", 0),
                      ("workers", 1), ("time_policies", 1), ("time_envs", 1)):
        if getattr(args, flag) < low:
            refuse(f"--{flag.replace('_', '-')} must be ≥ {low}, got {getattr(args, flag)}")
    rows, first = [], None
    for name in names:
        rows.append(measure(name, args, first))
        print(f"[{name}] {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
        first = first or Path(args.out) / name / stage.DIR
    base = next((r for r in rows if r["family"] == "paper"), None)
    for r in rows:
        r["rollout_time_ratio"] = (None if base is None
                                   else round(r["rollout_cpu_ms"] / base["rollout_cpu_ms"], 2))
    lr = config(names[0], args).distill.lr
    out = {"benchmark": "uav_student_capacity", "envs": args.envs, "rounds": args.rounds,
           "epochs": args.epochs, "lr": lr, "eval_envs": args.eval_envs, "families": rows}
    print(json.dumps(out))
    if args.save:
        Path(args.save).write_text(json.dumps(out, indent=1) + "\n")
    return out


if __name__ == "__main__":
    main()
