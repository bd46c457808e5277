"""UAV rollout throughput: batched (PyTorch) vs PyBullet on the same (θ, seeds), one JSON line.

    python benchmarks/uav_rollouts.py [--quick] [--device cpu|cuda|auto] [--eager] [--profile]

Both simulators roll the same k = 50 policies (θ ~ N(0, 0.1²), the paper's m = 50) on the same
seeds in this one process, so the ratio is measured under the same machine load. The batched
simulator is warmed up first (torch.compile happens there, reported as compile_s) and timed as
the best of a few repeats; PyBullet is timed once. `batched_rollouts_per_s_at_scale` also times
a larger batched-only workload (a cost-matrix chunk), which is what certification runs.
--profile adds "profile": where the at-scale time goes (ray casting, net conv layers, net head,
Depth Filter, collision sweeps, and the rest: dedup, indexing, state bookkeeping), measured by
wrapping the simulator's kernels with timers on one more at-scale run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from pacplan.worlds.uav import UAVWorld, raycast, spec
from pacplan.worlds.uav import policy as pol


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="finish in under a minute")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--eager", action="store_true", help="batched without torch.compile")
    ap.add_argument("--policies", type=int, default=50)
    ap.add_argument("--profile", action="store_true", help="time split of the at-scale run")
    args = ap.parse_args()
    n_seeds, n_scale, repeats = (6, 256, 3) if args.quick else (16, 1024, 5)
    k = args.policies
    thetas = np.random.default_rng(0).normal(0, 0.1, (k, spec.POLICY_DIM)).astype(np.float32)
    seeds = np.arange(100_000, 100_000 + n_seeds)

    batched = UAVWorld(simulator="batched", device=args.device, compile=not args.eager)
    t0 = time.perf_counter()
    batched.costs(thetas[:2], seeds[:2])  # builds, compiles (or loads the compile cache)
    compile_s = time.perf_counter() - t0
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        cb = batched.costs(thetas, seeds)
        best = min(best, time.perf_counter() - t0)
    scale_seeds = np.arange(200_000, 200_000 + n_scale)
    t0 = time.perf_counter()
    batched.costs(thetas, scale_seeds)
    scale_s = time.perf_counter() - t0

    bullet = UAVWorld(simulator="bullet")
    t0 = time.perf_counter()
    cp = bullet.costs(thetas, seeds)
    bullet_s = time.perf_counter() - t0

    b_rate = cb.size / best
    p_rate = cp.size / bullet_s
    scale_rate = n_scale * k / scale_s
    extra: dict[str, Any] = {}
    if args.profile:
        extra["profile"] = profile_split(batched, thetas, scale_seeds)
    print(
        json.dumps(
            {
                "batched_rollouts_per_s": round(b_rate, 1),
                "bullet_rollouts_per_s": round(p_rate, 2),
                "ratio": round(b_rate / p_rate, 1),
                "rollouts": int(cb.size),
                "share_identical_cost": float((cb == cp).mean()),
                "batched_rollouts_per_s_at_scale": round(scale_rate, 1),
                "ratio_at_scale": round(scale_rate / p_rate, 1),
                "rollouts_at_scale": n_scale * k,
                "paper_matrix_4000x50_minutes_est": round(4000 * 50 / scale_rate / 60, 2),
                "compile_s": round(compile_s, 1),
                "device": str(batched.sim.device),
                "compile": not args.eager,
                "torch_threads": batched.threads,
                "cpu_count": os.cpu_count(),
                "load_avg_1min": round(os.getloadavg()[0], 2),
                **extra,
            }
        )
    )


_PARTS = {  # profile key -> (object, attribute) wrapped with a timer
    "ray_casting": ("sim", "compiled"),
    "ray_casting_eager": ("raycast", "render_kernel"),
    "net_input_phases": ("sim", "phases"),
    "net_conv1": ("sim", "conv1"),
    "net_conv2": ("sim", "conv2"),
    "net_conv_eager": ("pol", "conv_features"),
    "net_head": ("pol", "head"),
    "depth_filter": ("cells", "scores"),
    "collision_sweeps": ("sim", "sweep"),
}


def profile_split(world: UAVWorld, thetas: np.ndarray, seeds: np.ndarray) -> dict[str, Any]:
    """Seconds per part of one rollout call and their share; "other" is the rest of the call
    (unique/dedup, gathers and scatters, padding, state transitions, host copies)."""
    sim = world.sim
    owners = {"sim": sim, "raycast": raycast, "pol": pol, "cells": sim.cells}
    spent = dict.fromkeys(_PARTS, 0.0)
    sync = torch.cuda.synchronize if sim.device.type == "cuda" else (lambda: None)
    with contextlib.ExitStack() as stack:
        for key, (owner, attr) in _PARTS.items():
            if getattr(owners[owner], attr, None) is not None:
                stack.enter_context(_timed(owners[owner], attr, key, spent, sync))
        t0 = time.perf_counter()
        world.costs(thetas, seeds)
        sync()
        total = time.perf_counter() - t0
    parts = {key: round(v, 3) for key, v in spent.items() if v > 0}
    parts["other"] = round(total - sum(spent.values()), 3)
    return {
        "total_s": round(total, 3),
        "seconds": parts,
        "share": {key: round(v / total, 3) for key, v in parts.items()},
        "rollouts": int(len(seeds) * len(thetas)),
    }


@contextlib.contextmanager
def _timed(owner: Any, attr: str, key: str, spent: dict[str, float],
           sync: Callable[[], None]) -> Iterator[None]:
    """Replace owner.attr by a timed wrapper (instance attribute or module function)."""
    fn = getattr(owner, attr)
    had_own = attr in vars(owner)

    def wrapper(*a: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*a, **kw)
        sync()
        spent[key] += time.perf_counter() - t0
        return out

    setattr(owner, attr, wrapper)
    try:
        yield
    finally:
        if had_own:
            setattr(owner, attr, fn)
        else:
            delattr(owner, attr)


if __name__ == "__main__":
    main()
