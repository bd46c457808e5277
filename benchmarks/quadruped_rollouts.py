"""Quadruped rollout speed: prints ONE JSON object.

    nice -n 5 python benchmarks/quadruped_rollouts.py [--rollouts 4]

Measures, on this machine:
- full 10 s rollouts (the open-loop reference gait on 23.3° terrain with the finish line moved out
  of reach, depth camera rendered every primitive as in a policy rollout) with 1 and 2 worker
  processes: rollouts/s and wall (and CPU) seconds per 10 s of simulated walking, with the default
  robot (the Derpy) and, for comparison, the old `minitaur` robot's clean contact model
  (`robot: minitaur, mounted_contacts: false`);
- rollouts of random 944-weight policies θ ∼ N(0, 0.1²) through `QuadrupedWorld.costs`
  (these usually fall within a few seconds, so they are cheaper than the 10 s bound);
- costs of the reference gait at 23.3° and 35° (0.5 m planks) and 35° with 0.25 m planks;
- the public code's environment (pybullet_envs' MinitaurGymEnv, PD control, flat plane, no
  camera) driven by the same gait for 10 s, when pybullet_envs is importable (it needs gym 0.25.2
  and protobuf 3.20.3; run this script from a throwaway venv that has them to fill it in);
- the engines (`engines`): CPU seconds per 10 s reference-gait rollout with depth rendered every
  primitive for PyBullet and MuJoCo (`physics="mujoco"`), their ratio, MuJoCo without its
  sky-ray shortcut (every ray cast at every geom: the same images, the time before the
  shortcut), and MuJoCo's speed-up with 2 simulator threads (`--engines-only` runs just this
  part);
- a projection of the paper preset, m = 50 policies on N = 4000 certification + 5000 test
  terrains = 450,000 rollouts, onto k workers, charging every rollout the full 10 s (an upper
  bound; prior training by ES is not included).
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.episode import RolloutConfig
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout
from pacplan.worlds.quadruped.sim import MinitaurSim, PhysicsConfig
from pacplan.worlds.quadruped.terrain import sample_terrain

STRAIGHT = REFERENCE_GAIT
PUBLIC_PHYSICS = {
    "source": "pybullet_envs.minitaur.envs.minitaur_gym_env.MinitaurGymEnv"
    "(pd_control_enabled=True), as the paper's code built it",
    "physics_time_step_s": 0.002,
    "action_repeat": 5,
    "control_time_step_s": 0.01,
    "solver_iterations": 60,
    "pd": "explicit torque kp=8, kd=0.3, recomputed every physics step",
    "self_collision": True,
    "cone_friction": False,
    "paper_code_primitive_s": 0.25,
    "paper_code_rollout_s": 5.0,
    "note": "the paper's code advanced its gait clock 0.02 s per 0.01 s control step, so its "
    "20 primitives of 25 steps simulated 5 s, not 10 s",
}


def _warm_sim(physics: PhysicsConfig) -> MinitaurSim:
    """A simulator already connected and loaded once, so timing starts at the first rollout."""
    sim = MinitaurSim(physics)
    sim.reset(sample_terrain(10_000, 23.3))
    return sim


def _time_gait_rollouts(sim: MinitaurSim, seeds: list[int]) -> dict[str, float]:
    """Reference-gait rollouts that run the whole horizon; (wall, cpu, simulated) seconds."""
    config = RolloutConfig(finish_dx=1e6)
    wall = cpu = sim_s = 0.0
    for seed in seeds:
        t0, c0 = time.perf_counter(), time.process_time()
        r = rollout(sim, sample_terrain(seed, 23.3), fixed_gait_controller(STRAIGHT), config)
        wall += time.perf_counter() - t0
        cpu += time.process_time() - c0
        sim_s += r.sim_time
    return {"wall": wall, "cpu": cpu, "sim": sim_s, "n": len(seeds)}


def _full_rollouts(args: tuple[list[int], bool]) -> dict[str, float]:
    """`_time_gait_rollouts` in a fresh simulator with the given contact model."""
    seeds, mounted = args
    sim = _warm_sim(PhysicsConfig() if mounted
                    else PhysicsConfig(robot="minitaur", mounted_contacts=False))
    try:
        return _time_gait_rollouts(sim, seeds)
    finally:
        sim.close()


def _policy_rollouts(args: tuple[list[int], int]) -> dict[str, float]:
    """Rollouts of random policies through the World interface."""
    seeds, first = args
    thetas = np.random.default_rng(first).normal(0.0, 0.1, (len(seeds), POLICY_DIM))
    world = QuadrupedWorld()
    world.sim.reset(sample_terrain(10_000))  # connect and load once before timing
    wall = sim_s = 0.0
    for seed, theta in zip(seeds, thetas, strict=True):
        t0 = time.perf_counter()
        sim_s += world.rollout(theta, seed).sim_time
        wall += time.perf_counter() - t0
    return {"wall": wall, "sim": sim_s, "n": len(seeds)}


def _step_profile(seeds: list[int]) -> dict[str, Any]:
    """Where a 10 s rollout's time goes, and what coarser physics would buy (a diagnostic).

    Times every `pybullet.stepSimulation` call of full reference-gait rollouts, then repeats
    them with 1 solver iteration instead of 60 (far coarser than the public code: not an option
    for certificates, only the floor on what the solver iterations can give back).
    """
    import pybullet

    inner = pybullet.stepSimulation
    spent = [0.0]

    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - t0

    out: dict[str, Any] = {}
    for iterations in (60, 1):
        sim = _warm_sim(PhysicsConfig(solver_iterations=iterations))
        spent[0] = 0.0
        pybullet.stepSimulation = timed
        try:
            timing = _time_gait_rollouts(sim, seeds)
        finally:
            pybullet.stepSimulation = inner
            sim.close()
        out[f"solver_iterations_{iterations}"] = {
            "wall_s_per_10s_sim": 10.0 * timing["wall"] / timing["sim"],
            "share_of_wall_in_stepSimulation": spent[0] / timing["wall"],
        }
    out["note"] = ("solver_iterations_1 is far coarser than the public code's 60 and is shown only "
                   "to bound what the solver costs; everything outside stepSimulation (PD "
                   "torques, camera, policy, reset) is the rest of the wall time")
    return out


def _two_processes(fn: Any, halves: list[Any]) -> tuple[float, list[dict[str, float]]]:
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        pool.map(math.sqrt, [1.0, 2.0])  # start both workers before timing
        t0 = time.perf_counter()
        parts = pool.map(fn, halves)
        return time.perf_counter() - t0, parts


def _gait_costs(slope: float, plank: float, n: int, mounted: bool = True) -> dict[str, Any]:
    clean = {} if mounted else {"robot": "minitaur", "mounted_contacts": False}
    world = QuadrupedWorld(max_slope_deg=slope, plank_length=plank, **clean)
    rs = [
        rollout(
            world.sim,
            sample_terrain(seed, slope, plank),
            fixed_gait_controller(STRAIGHT),
            needs_depth=False,
        )
        for seed in range(n)
    ]
    return {
        "seeds": f"0..{n - 1}",
        "costs": [round(r.cost, 3) for r in rs],
        "mean_cost": round(float(np.mean([r.cost for r in rs])), 3),
        "dx_m": [round(r.dx, 2) for r in rs],
        "falls": sum(r.fell for r in rs),
        "finished": sum(r.finished for r in rs),
    }


def _public_env() -> dict[str, Any]:
    """10 s of the reference gait in the public code's environment, if it can be imported."""
    try:
        fd = os.dup(1)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)  # pybullet_envs prints to stdout
        try:
            from pybullet_envs.minitaur.envs import minitaur_gym_env

            env = minitaur_gym_env.MinitaurGymEnv(
                urdf_version=minitaur_gym_env.DERPY_V0_URDF_VERSION,
                render=False,
                motor_velocity_limit=np.inf,
                pd_control_enabled=True,
                hard_reset=False,
                on_rack=False,
            )
            env.reset()
        finally:
            os.dup2(fd, 1)
            os.close(fd)
            os.close(null)
    except Exception as exc:
        return {"available": False, "reason": repr(exc)}
    facts = {
        "time_step_s": env._time_step,
        "action_repeat": env._action_repeat,
        "solver_iterations": env._num_bullet_solver_iterations,
    }
    steps = round(10.0 / env.control_time_step)
    t0, c0 = time.perf_counter(), time.process_time()
    for k in range(steps):
        t = k * env.control_time_step
        u, v = math.sin(30.0 * t) * 0.5, math.sin(30.0 * t + math.pi) * 0.5
        env.step([u, v, v, u, u, v, v, u])
    return {
        "available": True,
        "facts": facts,
        "wall_s_per_10s_sim": time.perf_counter() - t0,
        "cpu_s_per_10s_sim": time.process_time() - c0,
        "dx_m": env.minitaur.GetBasePosition()[0],
        "what": "flat plane, no camera, same gait; excludes reset",
    }


def _engines(n: int) -> dict[str, Any]:
    """CPU s per 10 s of walking with depth, PyBullet vs MuJoCo, and MuJoCo's 2-thread
    speed-up (wall time of 2n rollouts in 1 thread / in 2 threads, one simulator each)."""
    from pacplan.worlds.quadruped.mujoco_sim import MujocoMinitaurSim

    seeds = list(range(n))
    bullet = _time_gait_rollouts(_warm_sim(PhysicsConfig()), seeds)
    mj = MujocoMinitaurSim()
    mj.reset(sample_terrain(10_000, 23.3))
    mujoco_one = _time_gait_rollouts(mj, seeds)
    mj.ray_shortcuts = False  # before the sky-ray shortcut: every ray at every geom
    mujoco_full_rays = _time_gait_rollouts(mj, seeds)
    mj.ray_shortcuts = True
    cpu_bullet = 10.0 * bullet["cpu"] / bullet["sim"]
    cpu_mujoco = 10.0 * mujoco_one["cpu"] / mujoco_one["sim"]
    sims = [MujocoMinitaurSim(), MujocoMinitaurSim()]
    for sim in sims:
        sim.reset(sample_terrain(10_000, 23.3))
    halves = [list(range(100, 100 + n)), list(range(100 + n, 100 + 2 * n))]
    t0 = time.perf_counter()
    serial = [_time_gait_rollouts(sims[0], h) for h in halves]
    wall1 = time.perf_counter() - t0
    with ThreadPoolExecutor(2) as pool:
        t0 = time.perf_counter()
        parallel = list(pool.map(_time_gait_rollouts, sims, halves))
        wall2 = time.perf_counter() - t0
    same = all(a["sim"] == b["sim"] for a, b in zip(serial, parallel, strict=True))
    return {
        "what": "reference gait, 10 s (finish line out of reach), 50x50 depth every primitive",
        "bullet_cpu_s_per_10s_sim": round(cpu_bullet, 4),
        "mujoco_cpu_s_per_10s_sim": round(cpu_mujoco, 4),
        "mujoco_cpu_s_per_10s_sim_without_ray_shortcuts": round(
            10.0 * mujoco_full_rays["cpu"] / mujoco_full_rays["sim"], 4),
        "speedup_cpu_mujoco_vs_bullet": round(cpu_bullet / cpu_mujoco, 2),
        "goal_speedup": 7.0,
        "mujoco_2_threads_speedup": round(wall1 / wall2, 3),
        "goal_2_threads_speedup": 1.8,
        "mujoco_1_vs_2_threads_same_sim_time": same,
        "rollouts_per_measurement": n,
    }


def _speed(n: int) -> dict[str, Any]:
    """Rollout throughput (gait and random policies, 1 and 2 processes, both contact models)
    and the paper preset's projected cost in hours."""
    one = _full_rollouts((list(range(n)), True))
    wall2, parts = _two_processes(
        _full_rollouts, [(list(range(n)), True), (list(range(n, 2 * n)), True)]
    )
    clean = _full_rollouts((list(range(max(1, n // 2))), False))
    pol1 = _policy_rollouts((list(range(100, 100 + 2 * n)), 1))
    pwall2, _ = _two_processes(
        _policy_rollouts,
        [(list(range(100, 100 + 2 * n)), 1), (list(range(200, 200 + 2 * n)), 2)],
    )
    per10 = 10.0 * one["wall"] / one["sim"]
    per10_clean = 10.0 * clean["wall"] / clean["sim"]
    rollouts_total = 50 * (4000 + 5000)
    return {
        "full_10s_rollouts": {
            "rollouts_per_s_1_process": one["n"] / one["wall"],
            "rollouts_per_s_2_processes": sum(p["n"] for p in parts) / wall2,
            "wall_s_per_10s_sim_1_process": per10,
            "cpu_s_per_10s_sim_1_process": 10.0 * one["cpu"] / one["sim"],
            "wall_s_per_10s_sim_2_processes_each": 2 * 10.0 * wall2 / sum(p["sim"] for p in parts),
            "clean_contacts_wall_s_per_10s_sim": per10_clean,
            "clean_contacts_cpu_s_per_10s_sim": 10.0 * clean["cpu"] / clean["sim"],
        },
        "random_policy_rollouts": {
            "policies": "theta ~ N(0, 0.1^2); they mostly fall early",
            "rollouts_per_s_1_process": pol1["n"] / pol1["wall"],
            "rollouts_per_s_2_processes": 4 * n / pwall2,
            "mean_sim_s_per_rollout": pol1["sim"] / pol1["n"],
        },
        "paper_preset_projection_hours": {
            "rollouts": rollouts_total,
            "assumes": "m=50 x (N=4000 + 5000 test); every rollout charged 10 s; "
            "1-process wall per 10 s from this run; ES prior not included",
            **{f"k={k}": round(rollouts_total * per10 / k / 3600.0, 2) for k in (1, 2, 16, 64)},
            "clean_contacts": {
                f"k={k}": round(rollouts_total * per10_clean / k / 3600.0, 2)
                for k in (1, 2, 16, 64)
            },
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description="quadruped rollout speed (one JSON object)")
    parser.add_argument("--rollouts", type=int, default=4, help="rollouts per measurement")
    parser.add_argument("--engines-only", action="store_true",
                        help="only the PyBullet vs MuJoCo timing")
    args = parser.parse_args()
    n = args.rollouts
    load_before = os.getloadavg()
    if args.engines_only:
        engines = _engines(n)
        print(json.dumps({"machine": {"cpus": os.cpu_count(), "arch": platform.machine(),
                                      "loadavg_before": [round(x, 2) for x in load_before]},
                          "engines": engines,
                          "loadavg_after": [round(x, 2) for x in os.getloadavg()]}, indent=2))
        return
    speed = _speed(n)
    out = {
        "machine": {
            "cpus": os.cpu_count(),
            "arch": platform.machine(),
            "loadavg_before": [round(x, 2) for x in load_before],
            "note": "shared machine: wall times include other users' load; CPU seconds less so",
        },
        "physics": {
            "time_step_s": 0.002,
            "solver_iterations": 60,
            "pd": "explicit torque kp=8, kd=0.3, every physics step; gait target every step",
            "robot": "derpy (the paper's; no self-collision); clean_contacts: the old minitaur "
                     "robot with mounted_contacts=False",
            "depth": "50x50 TinyRenderer frame per 0.5 s primitive",
        },
        "public_code_physics": PUBLIC_PHYSICS,
        "full_10s_rollouts": speed["full_10s_rollouts"],
        "engines": _engines(n),
        "random_policy_rollouts": speed["random_policy_rollouts"],
        "reference_gait_costs": {
            "gait": "a1=a2=0.5, a_st=0, omega=30 rad/s, open loop",
            "slope_23.3_plank_0.5": _gait_costs(23.3, 0.5, n),
            "slope_35_plank_0.5": _gait_costs(35.0, 0.5, n),
            "slope_35_plank_0.25": _gait_costs(35.0, 0.25, n),
            "clean_contacts_slope_23.3_plank_0.5": _gait_costs(23.3, 0.5, n, mounted=False),
        },
        "step_profile": _step_profile(list(range(max(1, n // 2)))),
        "public_code_env": _public_env(),
        "paper_preset_projection_hours": speed["paper_preset_projection_hours"],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
