"""The UAV's batched simulator on a GPU: the same cost matrices as on the CPU? How much faster?

    python benchmarks/uav_cuda_agreement.py roll RUN OUT [--device cuda] [--cpu-seeds 400]
    python benchmarks/uav_cuda_agreement.py compare RUN OUT [--save FILE]

`roll` (on the machine with the GPU) re-computes a finished UAV run's certification and test
matrices (its 50 stored policies, its seeds, its world options) on `--device`, writes them to
OUT/cert.npy and OUT/test.npy, and times, in the same process, the device against the CPU
simulator with the project's default of one torch thread (on the first `--cpu-seeds`
certification seeds) and against torch's default thread count on that machine: rollouts/s of
each and their ratios, one JSON line (also OUT/roll.json). It needs only numpy, torch, PyYAML
and Gymnasium beside pacplan's source, so it runs from a source tree (PYTHONPATH=src).

`compare` (anywhere) reads those matrices beside the run's own (computed on a CPU) and reports
how many cells agree exactly, how far the rest differ, and the certificate and test estimate
each gives through pacplan's own posterior search: what a user who certifies on a GPU gets
against the published CPU figures. A cell can differ because the GPU's float32 arithmetic
differs from the CPU's in the last bits, which flips a near-tie between two primitives
(docs/worlds.md says the same of compiled against eager kernels).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.pipeline.rundir import checked_policies


class _BenchError(Exception):
    """Bad input to the benchmark: printed as one line, exit 2."""


def _config(run: Path) -> dict[str, Any]:
    """A finished UAV run's config.yaml; anything else is refused."""
    import yaml

    path = run / "config.yaml"
    if not path.is_file():
        raise _BenchError(f"{run} is not a run directory (no config.yaml)")
    config = yaml.safe_load(path.read_text())
    world = (config.get("world") or {}).get("name") if isinstance(config, dict) else None
    if world != "uav":
        raise _BenchError(f"{run} is a {world!r} run; this checks the UAV's simulator only")
    return config


def _run_parts(run: Path) -> tuple[dict[str, Any], np.ndarray, dict[str, np.ndarray]]:
    """The run's world options, its stored policies and its cert/test seeds."""
    config = _config(run)
    n_max = max(config["certificate"]["n"])
    lo = int(config["seeds"]["cert"][0])
    test_lo, test_hi = (int(v) for v in config["seeds"]["test"])
    seeds = {"cert": np.arange(lo, lo + n_max), "test": np.arange(test_lo, test_hi)}
    # a run directory's own draws (drawn again if a shipped run left them out), else the file
    policies = (checked_policies(run) if (run / "manifest.json").is_file()
                else np.load(run / "policies.npy", allow_pickle=False))
    return dict(config["world"].get("options") or {}), policies, seeds


def _rate(world: Any, thetas: np.ndarray, seeds: np.ndarray) -> tuple[np.ndarray, float]:
    t0 = time.perf_counter()
    costs = world.costs(thetas, seeds)
    return costs, seeds.size * len(thetas) / (time.perf_counter() - t0)


def roll(run: Path, out: Path, device: str, cpu_seeds: int,
         overrides: dict[str, int] | None = None) -> dict[str, Any]:
    import torch

    from pacplan.worlds.uav import UAVWorld

    options, thetas, seeds = _run_parts(run)
    options.update(overrides or {})
    gpu = UAVWorld(**{**options, "device": device})
    t0 = time.perf_counter()
    try:
        gpu.costs(thetas[:2], seeds["cert"][:2])  # builds and compiles
    except PacplanError as exc:  # e.g. no CUDA device here
        raise _BenchError(str(exc)) from None
    warm_s = time.perf_counter() - t0
    out.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"device": str(gpu.sim.device), "warmup_s": round(warm_s, 1)}
    if gpu.sim.device.type == "cuda":
        result["gpu"] = torch.cuda.get_device_name(gpu.sim.device)
    rates: dict[str, float] = {}
    for name in ("cert", "test"):
        costs, rates[name] = _rate(gpu, thetas, seeds[name])
        np.save(out / f"{name}.npy", costs, allow_pickle=False)
        result[f"device_{name}_rollouts_per_s"] = round(rates[name], 1)
        (out / "roll.json").write_text(json.dumps(result, indent=1) + "\n")  # if the CPU part fails
    sub = seeds["cert"][:cpu_seeds]
    gpu_sub, gpu_rate = _rate(gpu, thetas, sub)
    cpu_rates: dict[str, float] = {}
    share: dict[str, float] = {}
    for label, threads in (("cpu_1_thread", 1), ("cpu_default_threads", 0)):
        cpu = UAVWorld(**{**options, "device": "cpu", "threads": threads})
        cpu.costs(thetas[:2], seeds["cert"][:2])
        cpu_costs, cpu_rates[label] = _rate(cpu, thetas, sub)
        share[label] = float((cpu_costs == gpu_sub).mean())
    result.update({
        "rollouts_per_s": {"device_cert": round(rates["cert"], 1),
                           "device_test": round(rates["test"], 1),
                           "device_subset": round(gpu_rate, 1),
                           **{k: round(v, 1) for k, v in cpu_rates.items()}},
        "ratio_device_over": {k: round(gpu_rate / v, 2) for k, v in cpu_rates.items()},
        "subset_rollouts": int(sub.size * len(thetas)),
        "subset_share_identical_to_device": share,
        "torch": torch.__version__,
        "torch_default_threads": torch.get_num_threads(),
        "cpu_count": os.cpu_count(),
        "options": options,
    })
    (out / "roll.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def _matrix_figures(ref: np.ndarray, other: np.ndarray) -> dict[str, Any]:
    diff = np.abs(ref - other)
    differ = diff > 0
    return {"cells": int(ref.size), "identical_share": round(float(1 - differ.mean()), 6),
            "cells_differing": int(differ.sum()),
            "rows_differing": int(differ.any(axis=1).sum()),
            "max_abs_diff": float(diff.max()),
            "mean_cost_cpu": float(ref.mean()), "mean_cost_device": float(other.mean())}


def compare(run: Path, out: Path) -> dict[str, Any]:
    from pacplan import certify

    config = _config(run)
    cert_cfg = config["certificate"]
    result: dict[str, Any] = {"run": str(run)}
    mats: dict[str, dict[str, np.ndarray]] = {}
    for name in ("cert", "test"):
        if not (out / f"{name}.npy").is_file():
            raise _BenchError(f"{out} has no {name}.npy: run `roll` there first")
        ref = np.load(run / "costs" / f"{name}.npy", allow_pickle=False)
        other = np.load(out / f"{name}.npy", allow_pickle=False).astype(np.float64)
        if ref.shape != other.shape:
            raise _BenchError(f"{name}: the run's matrix is {ref.shape}, the device's "
                              f"{other.shape}")
        mats[name] = {"cpu": ref, "device": other}
        result[name] = _matrix_figures(ref, other)
    for n in cert_cfg["n"]:
        row: dict[str, Any] = {}
        for who in ("cpu", "device"):
            c = certify(mats["cert"][who][:n], delta=cert_cfg["delta"], test=mats["test"][who],
                        bound=cert_cfg["bound"], solver=cert_cfg["solver"])
            row[who] = {"certified": c.certified, "test_cost": c.test_cost,
                        "test_ci": c.test_ci}
        row["certified_diff_points"] = 100 * (row["device"]["certified"]
                                              - row["cpu"]["certified"])
        result[f"n{n}"] = row
    roll_file = out / "roll.json"
    if roll_file.exists():
        result["roll"] = json.loads(roll_file.read_text())
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("roll", "compare"))
    ap.add_argument("run", type=Path, help="a finished UAV run directory (e.g. results/uav)")
    ap.add_argument("out", type=Path, help="where the device's matrices are (or go)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--cpu-seeds", type=int, default=400)
    ap.add_argument("--chunk", action="append", default=[], metavar="NAME=INT",
                    help="roll: override a chunk option (env_chunk, render_chunk, policy_chunk)")
    ap.add_argument("--save", type=Path, help="also write the JSON here")
    args = ap.parse_args(argv)
    try:
        if args.cpu_seeds < 1:
            raise _BenchError(f"--cpu-seeds must be ≥ 1, got {args.cpu_seeds}")
        if args.mode == "roll":
            result = roll(args.run, args.out, args.device, args.cpu_seeds,
                          _chunks(args.chunk))
        else:
            result = compare(args.run, args.out)
    except _BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.save:
        args.save.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result))


CHUNK_OPTIONS = ("env_chunk", "render_chunk", "policy_chunk")


def _chunks(items: list[str]) -> dict[str, int]:
    """--chunk NAME=INT pairs: only the chunk sizes, which change no cost (eager, or compiled
    on one device: measured equal on the H200 at 32/64 and 256/512)."""
    out: dict[str, int] = {}
    for item in items:
        name, _, value = item.partition("=")
        if name not in CHUNK_OPTIONS or not value.isdigit() or int(value) < 1:
            raise _BenchError(f"--chunk {item!r}: give NAME=INT with NAME one of "
                              f"{', '.join(CHUNK_OPTIONS)} and INT ≥ 1")
        out[name] = int(value)
    return out


if __name__ == "__main__":
    main()
