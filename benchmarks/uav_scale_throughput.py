"""UAV cost-matrix throughput at the tight run's scale, today's code beside a baseline commit's,
with a roofline of where a rollout's time goes; one JSON line.

    python benchmarks/uav_scale_throughput.py [--seeds 1600] [--workers 2] [--quick]
        [--prior uav-paper-net] [--baseline-ref b8b946c | none] [--no-roofline]
        [--conv-width 4] [--conv-prior uav] [--chunk-seeds 200]

What a large certification run (uav-tight: 7.5 million rollouts) spends its time on: the
paper net prior's 50 policies (`--prior`, a shipped prior's name or a file; default
`uav-paper-net`, the paper net taught by the planner)
on fresh seeds, through pacplan's own executors with the uav-tight chunk sizes (200 seeds × 50
policies per chunk), compiled batched simulator, in one process and in `--workers` processes.

Side by side: `--baseline-ref` (default b8b946c, the commit before issue 38's speed-up of the
simulator) is materialised with `git archive` into a temporary directory, and both codes run
as subprocesses of this one (PYTHONPATH at that tree's src and runtime/src, or at today's), on
the same policies and seeds; for each executor in the order baseline, today on the first half
of the seeds, then today, baseline on the second half (each code's rate: all seeds over the
sum of its two timed parts), so a drifting machine load biases neither. Each executor is
warmed up first on one chunk per worker (each process compiles its own torch.compile graph;
with one warm chunk, a second worker compiled inside the timed part and two workers timed
slower than one), so the timed part is the steady rate. The tight run has thousands of
chunks, so no worker waits at its end; the default --seeds 1600 (halves of 4 chunks) keeps
that true for 2 workers. Reported: both rates, their ratio (the figure to trust on a busy
machine), and whether every cost matrix is identical (today against the baseline, one
process against K).

Roofline (`roofline`, computed by the sibling module uav_throughput_roofline.py): the
machine's peak on one torch thread (the simulator's setting), a float32 matrix product's
GFLOP/s and a large copy's GB/s, and for one chunk of each code the seconds per rollout, share
of the total and achieved fraction of the roofline of each part:
- ray_casting: `BatchedSimulator._render` (culling, the cylinder kernel, planes, clamp, net input)
- policy_net: `_net` (conv layers and the linear head) and the Depth Filter's cell means
- collision_sweep: `_sweep_states` (dedup, culling, sphere-cylinder distances)
- python_dispatch: the rest (scene sampling and tables, dedup of states, state transitions,
  tensor bookkeeping, the interpreter and torch's per-call overhead)
FLOPs and bytes are estimates counted from the work each kernel was actually given (cylinder ×
pixel pairs, (frame, policy) pairs, sphere × cylinder checks) times the per-item operation and
memory counts below; the fraction of peak is the achieved rate over min(peak FLOP/s, intensity ×
peak bandwidth). Divisions and square roots count as one FLOP, though they cost several.
A world other than uav is refused (one line, exit 2): this benchmark profiles only the UAV.

The conv policy family (`--conv-width W`, issue 52): today's code with world options
`policy: conv, policy_width: W` runs as a third code in the same ABBA order, on 50 policies
drawn from `--conv-prior` (a prior of that width, e.g. the shipped `uav` at width 4, drawn
as the paper net's are), or without one N(0, 0.05²) per weight (at that scale the net's scores
stay small, so these policies fly close to the Depth Filter and end earlier than a prior's: the
decisions flown per second, counted from the costs, are reported beside rollouts/s for that
reason). Reported: its rates, `conv_over_paper` (its rollouts/s and decisions/s over today's
paper net's, per executor; issue 52's goal is ≥ 0.5), whether its matrices are identical
between one process and K, and its roofline (policy_net: `conv_policy.conv_scores`, FLOPs of
its conv and linear layers per (frame, policy) pair).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

WARM_SEEDS = (9_000_000, 9_000_200)  # one chunk: the roofline's warm-up
CHUNK_SEEDS = 200  # uav-tight's chunk_seeds
FIRST_SEED = 9_100_000
DEFAULT_BASELINE = "b8b946c"

def decisions(costs: np.ndarray) -> int:
    """Primitives flown in all the rollouts of a cost matrix: 12 without a collision, else up
    to and including the one whose check collided (cost = 1 − checks · 0.05 / 12)."""
    checks = np.rint((1.0 - costs) * 240).astype(np.int64)
    return int(np.where(costs == 0, 12, (checks - 1) // 20 + 1).sum())


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=1600,
                    help="environments timed per executor (halves of a multiple of workers × "
                         "200 keep every worker busy to the end)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="400 seeds: a smoke run")
    ap.add_argument("--prior", default="uav-paper-net",
                    help="the paper net's prior: a shipped prior's name or a prior file")
    ap.add_argument("--world", default="uav", help="the world profiled (uav only)")
    ap.add_argument("--baseline-ref", default=DEFAULT_BASELINE,
                    help="git ref of the code to compare against ('none': today's code only)")
    ap.add_argument("--no-roofline", action="store_true", help="skip the time split")
    ap.add_argument("--chunk-seeds", type=int, default=CHUNK_SEEDS,
                    help="seeds per chunk (uav-tight's 200); each worker warms up on one chunk, "
                         "so a smaller one makes a short smoke run")
    ap.add_argument("--conv-prior", default=None,
                    help="draw the conv family's 50 policies from this prior (its width)")
    ap.add_argument("--conv-width", type=int, default=None,
                    help="also time the conv policy family of this policy_width beside the "
                         "paper's net")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        _child(Path(args.child))
        return
    try:
        out = _run(args)
    except _BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(json.dumps(out))


class _BenchError(Exception):
    """Bad input to the benchmark: printed as one line, exit 2."""


def _run(args: argparse.Namespace) -> dict[str, Any]:
    if args.world != "uav":
        raise _BenchError(f"uav_scale_throughput profiles the uav world only, not "
                          f"{args.world!r}")
    if args.seeds < 2 or args.workers < 1 or args.chunk_seeds < 1:
        raise _BenchError("--seeds must be at least 2 (two halves), --workers and "
                          "--chunk-seeds at least 1")
    conv = None
    if args.conv_width is not None:
        from pacplan.errors import PacplanError as _Refused
        from pacplan.worlds.uav.families import policy_family

        try:
            conv = policy_family("conv", args.conv_width)
        except _Refused as exc:
            raise _BenchError(f"--conv-width: {exc}") from None
    from pacplan.errors import PacplanError
    from pacplan.es.checkpoint import load_prior
    from pacplan.portable import exp
    from pacplan.presets import resolve_prior

    try:
        mu, logvar = load_prior(resolve_prior(args.prior))
    except PacplanError as exc:
        raise _BenchError(str(exc)) from None
    n_seeds = 400 if args.quick else args.seeds
    rng = np.random.default_rng(0)
    thetas = (mu + exp(0.5 * logvar) * rng.standard_normal((50, mu.size))).astype(np.float32)
    conv_thetas = None
    if conv is not None:
        conv_thetas = np.random.default_rng(1).normal(0.0, 0.05, (50, conv.dim))
        if args.conv_prior is not None:
            try:
                c_mu, c_logvar = load_prior(resolve_prior(args.conv_prior))
            except PacplanError as exc:
                raise _BenchError(f"--conv-prior: {exc}") from None
            if c_mu.size != conv.dim:
                raise _BenchError(f"--conv-prior has {c_mu.size} weights but policy_width "
                                  f"{conv.width} has {conv.dim}")
            conv_thetas = c_mu + exp(0.5 * c_logvar) * rng.standard_normal((50, c_mu.size))
    elif args.conv_prior is not None:
        raise _BenchError("--conv-prior needs --conv-width (the prior's width)")
    today = _code_paths()
    with tempfile.TemporaryDirectory(prefix="uav-throughput-") as tmp:
        work = Path(tmp)
        np.save(work / "thetas.npy", thetas)
        if conv_thetas is not None:
            np.save(work / "thetas_conv.npy", conv_thetas.astype(np.float32))
        seeds = np.arange(FIRST_SEED, FIRST_SEED + n_seeds, dtype=np.int64)
        for half, part in enumerate(np.array_split(seeds, 2)):
            np.save(work / f"seeds_{half}.npy", part)
        codes = {"today": today}
        ref = None
        if args.baseline_ref.lower() != "none":
            ref = _git_commit(today[0].parent, args.baseline_ref)
            codes = {"baseline": _materialise(today[0].parent, ref, work / "baseline"),
                     "today": today}
        if conv is not None:
            codes["conv"] = today
        options = {name: {} for name in codes}
        if conv is not None:
            options["conv"] = conv.options()
        out: dict[str, Any] = {
            "benchmark": "uav_scale_throughput", "world": "uav", "prior": args.prior,
            "seeds": n_seeds, "policies": 50, "rollouts": n_seeds * 50,
            "chunk_seeds": args.chunk_seeds,
            "baseline_ref": ref, "cpus": os.cpu_count(),
            **({"conv_width": conv.width, "conv_weights": conv.dim,
                "conv_prior": args.conv_prior} if conv else {}),
            "load_avg_1min": round(os.getloadavg()[0], 2),
        }
        many = f"{args.workers}_processes"
        plan = [("serial", None, "one_process"), ("processes", args.workers, many)]
        # per executor: baseline, today on the first half of the seeds, today, baseline on the
        # second (ABBA), so a load that drifts during the run favours neither code
        # (and the conv family after today's paper net, before it on the second half)
        order = [(n, 0) for n in codes] + [(n, 1) for n in reversed(codes)]
        rates: dict[str, dict[str, Any]] = {name: {} for name in codes}
        costs: dict[str, np.ndarray] = {}
        for kind, workers, label in plan:
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in codes}
            for name, half in order:
                job = {"task": "rate", "kind": kind, "workers": workers, "half": half,
                       "chunk_seeds": args.chunk_seeds,
                       "label": f"{name}-{label}-{half}", "options": options[name],
                       "thetas": "thetas_conv.npy" if name == "conv" else "thetas.npy"}
                runs[name].append(_spawn(codes[name], work, job))
            for name, done in runs.items():
                seconds = sum(r["seconds"] for r in done)
                costs[f"{name}-{label}"] = np.concatenate(
                    [np.load(work / f"{name}-{label}-{h}.npy") for h in (0, 1)])
                rates[name][label] = {
                    "rollouts_per_s": round(n_seeds * 50 / seconds, 1),
                    "decisions_per_s": round(decisions(costs[f"{name}-{label}"]) / seconds, 1),
                    "seconds": round(seconds, 2),
                    "warmup_s": round(sum(r["warmup_s"] for r in done), 2)}
        for name in codes:
            out[name] = rates[name]
        if "baseline" in codes:
            out["speedup_vs_baseline"] = {
                label: round(rates["today"][label]["rollouts_per_s"]
                             / rates["baseline"][label]["rollouts_per_s"], 3)
                for label in rates["today"]}
            out["goal_1_5x_met"] = bool(out["speedup_vs_baseline"][many] >= 1.5)
        if conv is not None:
            out["conv_over_paper"] = {
                label: {unit: round(rates["conv"][label][unit] / rates["today"][label][unit], 3)
                        for unit in ("rollouts_per_s", "decisions_per_s")}
                for label in rates["today"]}
            out["conv_goal_0_5x_met"] = bool(
                out["conv_over_paper"][many]["rollouts_per_s"] >= 0.5)
        first = costs["today-one_process"]
        paper = [c for key, c in costs.items() if not key.startswith("conv-")]
        out["identical_costs"] = {
            "one_vs_k_processes": bool(np.array_equal(first, costs[f"today-{many}"])),
            **({"today_vs_baseline": all(np.array_equal(first, c) for c in paper)}
               if "baseline" in codes else {}),
            **({"conv_one_vs_k_processes": bool(np.array_equal(costs["conv-one_process"],
                                                               costs[f"conv-{many}"]))}
               if conv is not None else {}),
        }
        out["mean_cost"] = round(float(np.mean(first)), 5)
        if conv is not None:
            out["conv_mean_cost"] = round(float(np.mean(costs["conv-one_process"])), 5)
        if not args.no_roofline:
            roof: dict[str, Any] = {}
            for name in codes:
                roof.update(_spawn(codes[name], work, {
                    "task": "roofline", "label": name, "peak": name == "today",
                    "options": options[name],
                    "thetas": "thetas_conv.npy" if name == "conv" else "thetas.npy"}))
            from uav_throughput_roofline import fractions  # the sibling module, as run

            fractions(roof)
            out["roofline"] = roof
    return out


def _code_paths() -> tuple[Path, Path]:
    """(src, runtime/src) of the pacplan this benchmark imports (today's code)."""
    import pacplan

    src = Path(pacplan.__file__).resolve().parents[1]
    return src, src.parent / "runtime" / "src"


def _git_commit(repo: Path, ref: str) -> str:
    """The full commit hash of `ref` in the repository at `repo` (one line if unknown)."""
    res = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet",
                          f"{ref}^{{commit}}"], capture_output=True, text=True)
    if res.returncode != 0:
        raise _BenchError(f"--baseline-ref {ref!r} is not a commit of {repo}")
    return res.stdout.strip()


def _materialise(repo: Path, commit: str, dest: Path) -> tuple[Path, Path]:
    """`git archive` of the commit's src and runtime/src into dest: (src, runtime/src)."""
    tar = subprocess.run(["git", "-C", str(repo), "archive", commit, "src", "runtime/src"],
                         capture_output=True, check=True).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(dest, filter="data")
    return dest / "src", dest / "runtime" / "src"


def _spawn(code: tuple[Path, Path], work: Path, job: dict[str, Any]) -> dict[str, Any]:
    """Run one job in a fresh Python whose pacplan is `code`; its JSON result."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in code)}
    (work / "job.json").write_text(json.dumps(job))
    res = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(work)],
                         env=env, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{job['label']} failed:\n{res.stderr[-3000:]}")
    result = json.loads(res.stdout.strip().splitlines()[-1])
    imported = Path(result.pop("pacplan_file")).resolve()
    if not imported.is_relative_to(code[0].resolve()):
        raise RuntimeError(f"{job['label']} imported {imported}, not the code under {code[0]}")
    return result


def _child(work: Path) -> None:
    """One job of the parent (`_spawn`), in the code tree that PYTHONPATH names."""
    import pacplan

    job = json.loads((work / "job.json").read_text())
    thetas = np.load(work / job.get("thetas", "thetas.npy"), allow_pickle=False)
    seeds = np.load(work / f"seeds_{job.get('half', 0)}.npy", allow_pickle=False)
    if job["task"] == "rate":
        result = _rate(thetas, seeds, job, work)
    else:
        from uav_throughput_roofline import roofline  # the sibling module, as run

        result = roofline(thetas, seeds[:200], job)
    print(json.dumps({**result, "pacplan_file": pacplan.__file__}))


def _rate(thetas: np.ndarray, seeds: np.ndarray, job: dict[str, Any], work: Path
          ) -> dict[str, Any]:
    """The executor's steady rate on `seeds` after one warm-up chunk; costs saved for the
    parent's comparison."""
    from pacplan.pipeline.execution.executors import WorldSpec, make_executor

    spec = WorldSpec("uav", {"simulator": "batched", "compile": True, **job.get("options", {})})
    # a chunk per worker: each process compiles (torch.compile) before the timed part
    chunk = int(job.get("chunk_seeds", CHUNK_SEEDS))
    warm = np.arange(WARM_SEEDS[0], WARM_SEEDS[0] + chunk * (job["workers"] or 1),
                     dtype=np.int64)
    with make_executor(job["kind"], job["workers"], chunk_policies=50,
                       chunk_seeds=chunk) as ex:
        t0 = time.perf_counter()
        ex.cost_matrix(spec, thetas, warm)
        warm_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        costs = ex.cost_matrix(spec, thetas, seeds)
        seconds = time.perf_counter() - t0
    np.save(work / f"{job['label']}.npy", costs)
    return {"rollouts_per_s": round(costs.size / seconds, 1), "seconds": round(seconds, 2),
            "warmup_s": round(warm_s, 2)}


if __name__ == "__main__":
    main()
