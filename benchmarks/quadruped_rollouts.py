"""Quadruped rollout speed: prints ONE JSON object.

    python benchmarks/quadruped_rollouts.py [--rollouts 6] [--slope 23.3]

Measures full 10 s rollouts of `QuadrupedWorld` (depth camera and policy included) with 1 and 2
worker processes, the wall seconds per 10 s of simulated walking, the same figure with the public
code's contact model (`mounted_contacts=True`), and projects the paper preset (m = 50 policies on
N = 4000 certification + 5000 test terrains) onto k workers. Every rollout is charged as if it ran
the full 10 s horizon (rollouts that fall or finish early are cheaper), so projections are upper
bounds for the given machine. Physics facts of the public code's environment (pybullet_envs'
MinitaurGymEnv with pd_control_enabled, as the paper's code built it) are stated alongside.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import time

import numpy as np

from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout
from pacplan.worlds.quadruped.sim import CameraConfig, MinitaurSim, PhysicsConfig
from pacplan.worlds.quadruped.terrain import sample_terrain

PUBLIC_PHYSICS = {
    "source": "pybullet_envs.minitaur.envs.minitaur_gym_env.MinitaurGymEnv"
    "(pd_control_enabled=True)",
    "physics_time_step_s": 0.002,
    "action_repeat": 5,
    "control_time_step_s": 0.01,
    "solver_iterations": 60,
    "pd_gains": {"kp": 8.0, "kd": 0.3},
    "pd_torque_recomputed": "every physics step (0.002 s)",
    "self_collision": True,
    "cone_friction": False,
    "primitive_in_sim_s": 0.25,
    "rollout_in_sim_s": 5.0,
    "note": "its gait clock advanced 0.02 s per 0.01 s control step: 20 primitives of 25 steps "
    "simulated 5 s, not 10 s",
}
STRAIGHT = GaitParams(a1=0.5, a2=0.5, a_st=0.0, omega=30.0)


def _policies(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 0.1, (n, POLICY_DIM)).astype(np.float32)


def _timed_rollouts(args: tuple[float, list[tuple[int, np.ndarray]]]) -> tuple[float, float]:
    """Run (seed, theta) rollouts in this process; return (wall s, simulated s)."""
    slope, jobs = args
    world = QuadrupedWorld(max_slope_deg=slope)
    world.rollout(jobs[0][1], 10_000)  # warm-up (connect, load) outside the timing
    sim_s = 0.0
    t0 = time.perf_counter()
    for seed, theta in jobs:
        sim_s += world.rollout(theta, seed).sim_time
    return time.perf_counter() - t0, sim_s


def _reference_gait_per_10s(slope: float, mounted_contacts: bool, n: int) -> dict[str, float]:
    """Wall seconds per 10 s simulated for the open-loop reference gait, and its costs."""
    sim = MinitaurSim(PhysicsConfig(mounted_contacts=mounted_contacts), CameraConfig())
    wall = sim_s = 0.0
    costs = []
    for seed in range(n):
        terrain = sample_terrain(seed, slope)
        t0 = time.perf_counter()
        r = rollout(sim, terrain, fixed_gait_controller(STRAIGHT), needs_depth=True)
        wall += time.perf_counter() - t0
        sim_s += r.sim_time
        costs.append(r.cost)
    sim.close()
    return {
        "wall_s_per_10s_sim": 10.0 * wall / sim_s,
        "mean_cost": float(np.mean(costs)),
        "rollouts": n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=6, help="rollouts per measurement")
    parser.add_argument("--slope", type=float, default=23.3, help="max_slope_deg")
    args = parser.parse_args()
    n = args.rollouts
    thetas = _policies(2 * n, 0)
    jobs = [(1000 + i, thetas[i]) for i in range(2 * n)]

    wall1, sim1 = _timed_rollouts((args.slope, jobs[:n]))
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(_timed_rollouts, [(args.slope, jobs[:1]), (args.slope, jobs[1:2])])  # warm
        t0 = time.perf_counter()
        parts = pool.map(_timed_rollouts, [(args.slope, jobs[0::2]), (args.slope, jobs[1::2])])
        wall2 = time.perf_counter() - t0
    sim2 = sum(p[1] for p in parts)

    per10 = 10.0 * wall1 / sim1
    per10_2 = 10.0 * wall2 / sim2 * 2  # wall per 10 s simulated, per process
    rollouts_total = 50 * (4000 + 5000)
    projection = {
        f"k={k}": round(rollouts_total * per10 / k / 3600.0, 2) for k in (1, 2, 16, 64, 256)
    }
    out = {
        "machine": {
            "cpu_count": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "loadavg_before": os.getloadavg(),
        },
        "max_slope_deg": args.slope,
        "physics": {
            "time_step_s": 0.002,
            "solver_iterations": 60,
            "pd_torque_recomputed": "every physics step (0.002 s); gait target too",
            "self_collision": True,
            "mounted_contacts": False,
            "depth_camera": "TinyRenderer 50x50 once per 0.5 s primitive",
        },
        "public_code_physics": PUBLIC_PHYSICS,
        "policy_rollouts": {
            "policies": "theta ~ N(0, 0.1^2), 944 weights",
            "rollouts_per_s_1_process": n / wall1,
            "rollouts_per_s_2_processes": 2 * n / wall2,
            "mean_sim_s_per_rollout": sim1 / n,
            "wall_s_per_10s_sim_1_process": per10,
            "wall_s_per_10s_sim_2_processes_each": per10_2,
        },
        "reference_gait": {
            "gait": "a1=a2=0.5, a_st=0, omega=30 rad/s",
            "this_code": _reference_gait_per_10s(args.slope, False, max(2, n // 2)),
            "with_public_mounted_contacts": _reference_gait_per_10s(args.slope, True, 2),
        },
        "paper_preset_projection_hours": {
            "rollouts": rollouts_total,
            "assumes": "every rollout runs the full 10 s; 1-process wall per 10 s; "
            "prior training (ES) not included",
            **projection,
        },
        "loadavg_after": os.getloadavg(),
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
