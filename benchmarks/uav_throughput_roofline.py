"""The roofline part of benchmarks/uav_scale_throughput.py: where one chunk's rollout time goes
in a code tree (ray casting, the policy net, collision sweeps, Python dispatch), the work each
part was given, and the achieved fraction of the machine's one-thread roofline.

FLOPs and bytes are estimates counted from the work each kernel was actually given (cylinder ×
pixel pairs, (frame, policy) pairs, sphere × cylinder checks) times the per-item operation and
memory counts below; the fraction of peak is the achieved rate over min(peak FLOP/s, intensity ×
peak bandwidth). Divisions and square roots count as one FLOP, though they cost several. The
conv policy family's net (`policy: conv`) counts `conv_pair` per (frame, policy) pair.
Imported by the benchmark's child processes, whose PYTHONPATH names the code tree profiled.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

WARM_SEEDS = (9_000_000, 9_000_200)  # one chunk: the roofline's warm-up

# Estimated work per item: (FLOPs, bytes moved), float32 unless noted.
RAY_PAIR = (30, 8)  # one cylinder × one pixel: side quadratic + two caps; reads da, a2
RAY_PIXEL = (10, 16)  # one frame pixel: two planes, clamp, net input; nearest hit in, 2 out
NET_PAIR = (2 * 24 * 24 * 16 * 2 + 23 * 23 * 8 * 2, 4 * (2500 + 2 * 2 * 576 + 529))
HEAD_CELL = (529 * 25 * 2 + 25 * 25 * 2, 4 * (529 + 25))  # one (row, policy) of the fc layers
FILTER_FRAME = (625, 4 * 625)  # 25 cells × 25 pixels
SWEEP_PAIR = (23, 8 * 7)  # one check × one cylinder, float64: distance, compare


def conv_pair(width: int) -> tuple[int, int]:
    """(FLOPs, bytes) of the conv family's net on one (frame, policy) pair: multiply-adds of
    both conv layers and the two linear layers; image in, weights of the policy read."""
    w2, hidden = 2 * width, 128
    macs = (24 * 24 * width * 16 + 11 * 11 * w2 * width * 16 + w2 * 121 * hidden
            + hidden * 25)
    weights = width * 17 + w2 * (width * 16 + 1) + hidden * (w2 * 121 + 1) + 25 * (hidden + 1)
    return 2 * macs, 4 * (2500 + weights)


def roofline(thetas: np.ndarray, seeds: np.ndarray, job: dict[str, Any]) -> dict[str, Any]:
    """Where one chunk's time goes in this code, and (job["peak"]) the machine's peak."""
    from pacplan.worlds.uav import UAVWorld, raycast
    from pacplan.worlds.uav import policy as pol

    options = job.get("options", {})
    world = UAVWorld(simulator="batched", compile=True, **options)
    sim = world.sim
    world.costs(thetas, np.arange(*WARM_SEEDS, dtype=np.int64))  # compile / load the cache
    spent = {"ray_casting": 0.0, "policy_net": 0.0, "collision_sweep": 0.0}
    work = {"ray_pairs": 0, "pixels": 0, "net_pairs": 0, "head_cells": 0, "frames": 0,
            "sweep_pairs": 0}
    restore: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, attr: str, key: str | None, count: Any = None) -> None:
        fn = getattr(owner, attr)
        restore.append((owner, attr, fn))

        def timed(*a: Any, **kw: Any) -> Any:
            t0 = time.perf_counter()
            result = fn(*a, **kw)
            if key is not None:
                spent[key] += time.perf_counter() - t0
            if count is not None:
                count(a)
            return result

        setattr(owner, attr, timed)

    def count_ray(a: tuple) -> None:  # slot kernel (cylinders (S, G) at 7) or render kernel
        pairs = a[7] if len(a) == 9 else a[4]  # ... or w (F, K, 3) at 4
        work["ray_pairs"] += pairs.shape[0] * pairs.shape[1] * a[1].shape[-1]

    def count_sweep(a: tuple) -> None:
        pairs = a[4] if len(a) > 4 and a[4] is not None else None
        checks = a[3].shape[1]
        work["sweep_pairs"] += checks * (pairs[0].shape[0] if pairs is not None
                                         else a[1].shape[0] * a[0].centres.shape[1])

    wrap(sim, "_render", "ray_casting")
    wrap(sim, "_net", "policy_net")
    conv_pair_work = conv_pair(int(options["policy_width"])) if options else None
    if conv_pair_work is not None:  # called through the module: (images, frame, policy, parts)
        from pacplan.worlds.uav import conv_policy

        wrap(conv_policy, "conv_scores", "policy_net", lambda a: work.__setitem__(
            "net_pairs", work["net_pairs"] + int(a[1].shape[0])))
    wrap(sim.cells, "scores", "policy_net",
         lambda a: work.__setitem__("frames", work["frames"] + a[0].shape[0]))
    wrap(sim, "_sweep_states", "collision_sweep")
    wrap(sim, "compiled", None, count_ray)
    if hasattr(sim, "conv2"):  # conv2(hidden, ...) or conv_at(xp, rows, ...)
        wrap(sim, "conv2", None, lambda a: work.__setitem__("net_pairs",
                                                            work["net_pairs"] + a[0].shape[0]))
    else:
        wrap(sim, "conv", None, lambda a: work.__setitem__("net_pairs",
                                                           work["net_pairs"] + a[1].shape[0]))
    wrap(pol, "head", None, lambda a: work.__setitem__("head_cells", work["head_cells"]
                                                       + a[0].shape[0] * a[0].shape[1]))
    wrap(raycast, "sweep_kernel", None, count_sweep)
    try:
        t0 = time.perf_counter()
        world.costs(thetas, seeds)
        total = time.perf_counter() - t0
    finally:
        for owner, attr, fn in reversed(restore):
            setattr(owner, attr, fn)
    work["pixels"] = work["frames"] * 2500
    rollouts = thetas.shape[0] * len(seeds)
    seconds = {**spent, "python_dispatch": total - sum(spent.values())}
    items = {
        "ray_casting": [(work["ray_pairs"], RAY_PAIR), (work["pixels"], RAY_PIXEL)],
        "policy_net": [(work["net_pairs"], conv_pair_work or NET_PAIR),
                       (work["head_cells"], HEAD_CELL), (work["frames"], FILTER_FRAME)],
        "collision_sweep": [(work["sweep_pairs"], SWEEP_PAIR)],
    }
    parts: dict[str, Any] = {}
    for key, s in seconds.items():
        row: dict[str, Any] = {"s_per_rollout": float(f"{s / rollouts:.3e}"),
                               "share": round(s / total, 3)}
        if key in items:
            flops = sum(n * per[0] for n, per in items[key])
            moved = sum(n * per[1] for n, per in items[key])
            row.update(gflop_per_s=round(flops / s / 1e9, 3), gb_per_s=round(moved / s / 1e9, 3),
                       flop_per_byte=round(flops / moved, 2))
        parts[key] = row
    result: dict[str, Any] = {job["label"]: {"rollouts_per_s": round(rollouts / total, 1),
                                             "parts": parts, "work": work}}
    if job["peak"]:
        result["peak_one_thread"] = peak()
    return result


def fractions(roof: dict[str, Any]) -> None:
    """Each part's achieved FLOP/s over its roofline, min(peak FLOP/s, intensity × peak GB/s)."""
    peak = roof.get("peak_one_thread")
    if peak is None:
        return
    for code in roof.values():
        for row in code.get("parts", {}).values():
            if "flop_per_byte" in row:
                ceiling = min(peak["gflop_per_s"], row["flop_per_byte"] * peak["gb_per_s"])
                row["fraction_of_roofline"] = round(row["gflop_per_s"] / ceiling, 3)


def peak() -> dict[str, float]:
    """One torch thread's float32 matmul GFLOP/s and copy GB/s (best of a few; read + write)."""
    import torch

    torch.set_num_threads(1)
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    gflops = 2 * 1024**3 / best / 1e9
    x, y = torch.randn(32 * 2**20), torch.empty(32 * 2**20)  # 128 MiB each
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        y.copy_(x)
        best = min(best, time.perf_counter() - t0)
    return {"gflop_per_s": round(gflops, 1), "gb_per_s": round(2 * x.numel() * 4 / best / 1e9, 1),
            "threads": 1}
