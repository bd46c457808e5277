"""Steps/s of the UAV Gymnasium env alone and beside a busy process, one torch thread vs torch's
default, as one JSON line.

    python benchmarks/gym_env_speed.py [--seconds 3] [--repeats 3]

Why: with torch's default intra-op threads (one per core) every op of the batched ray caster is
a parallel region that waits for all its threads, so when another process takes a core the env
waits for a descheduled thread at every op. The env therefore runs torch on one thread
(`torch_threads=1`, the default); `torch_threads=0` leaves torch's default and is the "before".

One process measures both settings, alternating, under the same machine load: "alone", then
"busy" with a competing subprocess spinning on the CPU (started and ended here). Each cell is the
median of `repeats` windows of `seconds`, counting env steps of uniformly random actions
(episodes end often, so resets are part of the cost, as in training).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import gymnasium as gym
import numpy as np

import pacplan  # noqa: F401 - registers the environments

ENV_ID = "pacplan/UAVObstacleField-v0"
SETTINGS = {"one_thread": 1, "torch_default": 0}


def steps_per_second(env: gym.Env, seconds: float, rng: np.random.Generator) -> float:
    """Env steps per second of random actions over `seconds` (resets included)."""
    env.reset(seed=int(rng.integers(2**31)))
    steps, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        _, _, terminated, truncated, _ = env.step(int(rng.integers(env.action_space.n)))
        steps += 1
        if terminated or truncated:
            env.reset()
    return steps / elapsed


def measure(envs: dict[str, gym.Env], seconds: float, repeats: int) -> dict[str, float]:
    """Median steps/s of each env, the settings alternating so they share the machine's load."""
    rng = np.random.default_rng(0)
    rates: dict[str, list[float]] = {name: [] for name in envs}
    for _ in range(repeats):
        for name, env in envs.items():
            rates[name].append(steps_per_second(env, seconds, rng))
    return {name: round(statistics.median(r), 1) for name, r in rates.items()}


def busy_process() -> subprocess.Popen[bytes]:
    """A competing process that keeps one core busy until it is killed."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=3.0, help="length of one timed window")
    ap.add_argument("--repeats", type=int, default=3, help="windows per cell (median)")
    args = ap.parse_args()

    import torch

    envs = {name: gym.make(ENV_ID, torch_threads=n) for name, n in SETTINGS.items()}
    measure(envs, 0.5, 1)  # warm up: simulators built, first scenes loaded
    alone = measure(envs, args.seconds, args.repeats)
    competitor = busy_process()
    try:
        time.sleep(0.5)
        busy = measure(envs, args.seconds, args.repeats)
    finally:
        competitor.kill()
        competitor.wait()
    for env in envs.values():
        env.close()
    result = {
        "env": ENV_ID,
        "cpu_count": os.cpu_count(),
        "torch_default_threads": torch.get_num_threads(),
        "seconds_per_window": args.seconds,
        "repeats": args.repeats,
        "steps_per_s": {name: {"alone": alone[name], "busy": busy[name]} for name in SETTINGS},
        "busy_over_alone": {name: round(busy[name] / alone[name], 3) for name in SETTINGS},
        "one_thread_over_default_when_busy": round(busy["one_thread"] / busy["torch_default"], 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
