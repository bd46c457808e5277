"""Rollouts/s of `pacplan certify-policy` in one process against two worker processes, on
CartPole and on a MuJoCo task, in one run, as one JSON object (issue 51: goal ≥ 1.8× with two
workers on an idle machine).

    python benchmarks/certify_policy_workers.py [--cartpole-n 1500] [--mujoco-n 400] [--save]

Each task certifies the same two `module:callable` policies (written to a temporary folder,
as a user's own module would be) on the same seeds, first with `workers=1`, then with
`workers=2` (spawned processes, their start-up included), each into a fresh folder; the
matrices must be byte-identical. Rollouts/s is N × m / wall seconds of the whole command.
--save writes benchmarks/data/certify-policy-workers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

POLICIES = '''
import numpy as np


def balance(obs):
    return int(obs[2] + 0.5 * obs[3] > 0)


def lean(obs):
    return int(obs[2] > 0)


def stride(obs):
    """HalfCheetah: a fixed gait from the joint angles (a policy that moves)."""
    return np.tanh(np.asarray(obs[1:7], dtype=np.float32) * 2.0).astype(np.float32)


def still(obs):
    return np.zeros(6, dtype=np.float32)
'''

DATA = Path(__file__).resolve().parent / "data"  # before the run's chdir

TASKS = {
    "cartpole": {"env": "CartPole-v1", "policies": ["bench_policies:balance",
                                                    "bench_policies:lean"],
                 "cost": "terminated", "horizon": 500},
    "mujoco": {"env": "HalfCheetah-v5", "policies": ["bench_policies:stride",
                                                     "bench_policies:still"],
               "cost": "return", "horizon": 200, "reward_bounds": [-3.0, 20.0]},
}


def run(task: dict, n: int, workers: int, out: Path) -> float:
    """Wall seconds of one certify-policy command."""
    from pacplan.policy_certification import certify_policy

    options = {k: v for k, v in task.items() if k not in ("env", "policies")}
    start = time.perf_counter()
    certify_policy(task["env"], task["policies"], n=n, out=out, workers=workers, **options)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cartpole-n", type=int, default=1500)
    parser.add_argument("--mujoco-n", type=int, default=400)
    parser.add_argument("--save", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "bench_policies.py").write_text(POLICIES)
        sys.path.insert(0, str(folder))
        os.chdir(folder)  # MuJoCo writes its MUJOCO_LOG.TXT where it runs
        result: dict = {"cpus": os.cpu_count(), "tasks": {}}
        for name, n in (("cartpole", args.cartpole_n), ("mujoco", args.mujoco_n)):
            task = TASKS[name]
            seconds = {w: run(task, n, w, folder / f"{name}-{w}") for w in (1, 2)}
            same = all((folder / f"{name}-1" / "costs" / f).read_bytes()
                       == (folder / f"{name}-2" / "costs" / f).read_bytes()
                       for f in ("cert.npy",))
            rollouts = n * len(task["policies"])
            result["tasks"][name] = {
                "env": task["env"], "n": n, "policies": len(task["policies"]),
                "horizon": task["horizon"],
                "seconds": {str(w): round(s, 3) for w, s in seconds.items()},
                "rollouts_per_s": {str(w): round(rollouts / s, 1) for w, s in seconds.items()},
                "speedup_2_over_1": round(seconds[1] / seconds[2], 2),
                "matrices_identical": same}
    text = json.dumps(result, indent=1)
    print(text)
    if args.save:
        path = DATA / "certify-policy-workers.json"
        path.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
