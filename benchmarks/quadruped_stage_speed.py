"""Where the taught quadruped prior's compute goes, stage by stage; ONE JSON object.

    nice -n 5 python benchmarks/quadruped_stage_speed.py [--terrains 6] [--policies 4]
        [--epochs 20] [--first-seed 9473000] [--save]

Every stage of issue 35 is rollouts, so this measures each here, in one process with one torch
thread, on the same held-out terrains (from `--first-seed`, checked disjoint from every shipped
quadruped preset's seeds), in the world quadruped-paper certifies (the Derpy in MuJoCo, 23.3°):
- certification: `QuadrupedWorld.costs` of `--policies` draws of the ES-only prior
  (`quadruped-es`);
- the teacher twice: as a run's baseline row walks it (`planner: teacher`; its decisions are not
  kept, so a look-ahead that finishes ends the search) and as distillation records it (every
  candidate scored); rollouts/s of each, their ratio, and a check that the costs are equal to
  the bit;
- distillation: a DAgger round's labelling (`distill.label_episode`, the prior's mean walking,
  the teacher scoring every state it reaches): labelled states/s; then `distill.fit` with
  quadruped-prior's settings on those states: states × epochs per second;
- inside a rollout: the CPU time of a physics step, split by MuJoCo's own timers (collision,
  the constraint solver, the rest of the step), and of the depth image taken per decision;
- MuJoCo's constraint solvers (Newton, its default and the model's, against CG and PGS) on the
  best constant gait's episodes: the CPU-time ratio and whether the costs stay bit-identical.
  The time step (0.002 s) is the world's specification (DESIGN.md §5) and is not a setting
  tried here.
Times are process CPU seconds, so another job on the machine slows a stage less than it
stretches its wall time; compare the ratios, which come from the same run.
`--save` writes benchmarks/data/quadruped-stage-speed.json. Bad input: one line, exit 2.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
SAVE = ROOT / "benchmarks" / "data" / "quadruped-stage-speed.json"
OPTIONS = {"max_slope_deg": 23.3, "physics": "mujoco", "robot": "derpy"}
FIRST_SEED = 9_473_000
SOLVERS = {"newton": 2, "cg": 1, "pgs": 0}  # mujoco.mjtSolver values


class _BenchError(Exception):
    """Bad input to the benchmark: printed as one line, exit 2."""


def _cpu(fn: Any) -> tuple[Any, float]:
    t0 = time.process_time()
    out = fn()
    return out, time.process_time() - t0


def certification(world: Any, seeds: np.ndarray, policies: int) -> tuple[dict, np.ndarray]:
    """Draws of the ES-only prior (quadruped-es) walked through `costs`, as a run's cert stage
    walks them."""
    from pacplan.es.checkpoint import load_prior
    from pacplan.presets import resolve_prior

    mu, logvar = load_prior(resolve_prior("quadruped-es"))  # the prior its saved data timed
    draws = mu + np.exp(0.5 * logvar) * np.random.default_rng(0).standard_normal(
        (policies, mu.size))
    costs, cpu = _cpu(lambda: world.costs(draws, seeds))
    return {"rollouts": int(costs.size), "cpu_s_per_rollout": round(cpu / costs.size, 4),
            "rollouts_per_cpu_s": round(costs.size / cpu, 3),
            "mean_cost": round(float(costs.mean()), 4)}, mu


def teacher(world: Any, seeds: np.ndarray) -> dict:
    """The teacher's episodes as a baseline row walks them and as distillation records them."""
    from pacplan.worlds.quadruped.teacher import QuadrupedTeacher

    t = QuadrupedTeacher(world)
    row, cpu_row = _cpu(lambda: t.costs(seeds))
    kept, cpu_kept = _cpu(lambda: [t.rollout(int(s)) for s in seeds])
    if not np.array_equal(row, [k.result.cost for k in kept]):
        raise SystemExit("the teacher's costs differ between its two paths: a defect")
    n = len(seeds)
    return {"rollouts": n, "mean_cost": round(float(row.mean()), 4),
            "decisions_per_rollout": round(sum(len(k.decisions) for k in kept) / n, 2),
            "baseline_row_cpu_s_per_rollout": round(cpu_row / n, 3),
            "recording_cpu_s_per_rollout": round(cpu_kept / n, 3),
            "early_stop_speedup": round(cpu_kept / cpu_row, 3), "costs_identical": True}


def distillation(world: Any, seeds: np.ndarray, student: np.ndarray, epochs: int) -> dict:
    """A DAgger round's labelling on `seeds` (the student walks, the teacher scores), then the
    fit on what it labelled."""
    from pacplan.config import load_config
    from pacplan.pipeline.prior.distill_quadruped import KERNEL, start_theta
    from pacplan.presets import preset_path
    from pacplan.worlds.quadruped import distill
    from pacplan.worlds.quadruped.teacher import QuadrupedTeacher, TeacherConfig

    t = QuadrupedTeacher(world)
    parts, cpu_label = _cpu(lambda: [distill.label_episode(world, t, int(s), student)[0]
                                     for s in seeds])
    data = distill.Labelled.concat(parts)
    d = load_config(preset_path("quadruped-prior")).distill
    etas = distill.candidate_etas(TeacherConfig())
    _, cpu_fit = _cpu(lambda: distill.fit(start_theta(), data, data.scores, etas, kernel=KERNEL,
                                          epochs=epochs, lr=d.lr, batch=d.batch, seed=0))
    return {"labelled_states": len(data),
            "label_cpu_s_per_state": round(cpu_label / len(data), 3),
            "labelled_states_per_cpu_s": round(len(data) / cpu_label, 3),
            "fit_epochs": epochs, "fit_batch": d.batch,
            "fit_state_epochs_per_cpu_s": round(len(data) * epochs / cpu_fit, 1)}


def inside_a_rollout(world: Any, seed: int) -> dict:
    """MuJoCo's timers per physics step over 10 s of the best constant gait on terrain `seed`
    (`mujoco.rollout` does not fill them, so the same model is stepped with mj_step here), and
    the depth image's CPU time: one image per 0.5 s primitive of 250 steps."""
    import mujoco

    from pacplan.worlds.quadruped.gait import gait_motor_angles
    from pacplan.worlds.quadruped.scene import MOTOR_DIRECTION
    from pacplan.worlds.quadruped.teacher import BEST_CONSTANT_GAIT

    sim = world.sim
    sim.reset(world.terrain(seed))
    m, d = sim.model, sim.data
    dt = world.physics.time_step
    steps = round(world.rollout_config.horizon_s / dt)
    phases = BEST_CONSTANT_GAIT.omega * dt * np.arange(1, steps + 1)
    targets = gait_motor_angles(BEST_CONSTANT_GAIT, phases) * MOTOR_DIRECTION
    for i in range(len(d.timer)):
        d.timer[i].duration, d.timer[i].number = 0.0, 0

    def step_all() -> None:
        for target in targets:
            d.ctrl[:] = target
            mujoco.mj_step(m, d)

    _, cpu_steps = _cpu(step_all)
    # MuJoCo's timers are wall-clock: they give each part's share of a step, and the step's
    # CPU time (which another job on the machine does not stretch) sizes it
    timer = {k: d.timer[v].duration for k, v in (
        ("step", mujoco.mjtTimer.mjTIMER_STEP),
        ("collision", mujoco.mjtTimer.mjTIMER_POS_COLLISION),
        ("constraint_solver", mujoco.mjtTimer.mjTIMER_CONSTRAINT))}
    step_us = cpu_steps / steps * 1e6
    per = {"step": step_us} | {k: step_us * timer[k] / timer["step"]
                               for k in ("collision", "constraint_solver")}
    per["rest"] = per["step"] - per["collision"] - per["constraint_solver"]
    sim.reset(world.terrain(seed))
    _, cpu = _cpu(lambda: [sim.depth_image() for _ in range(20)])
    image_us = cpu / 20 * 1e6
    primitive_steps = round(world.rollout_config.primitive_s / dt)
    physics_us = per["step"] * primitive_steps
    return {"steps": steps, "us_per_step": {k: round(v, 2) for k, v in per.items()},
            "depth_image_ms": round(image_us / 1e3, 3),
            "share_of_a_primitive": {"physics": round(physics_us / (physics_us + image_us), 3),
                                     "depth_image": round(image_us / (physics_us + image_us), 3)}}


def solvers(world: Any, seeds: np.ndarray) -> dict:
    """The best constant gait's episodes under each MuJoCo constraint solver (same process,
    alternated twice so load drifts cancel); CPU time relative to the model's Newton."""
    from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout
    from pacplan.worlds.quadruped.teacher import BEST_CONSTANT_GAIT

    sim, ctl = world.sim, fixed_gait_controller(BEST_CONSTANT_GAIT)
    sim.reset(world.terrain(int(seeds[0])))
    model_solver = int(sim.model.opt.solver)
    cpu = dict.fromkeys(SOLVERS, 0.0)
    costs: dict[str, list[float]] = {}
    for _ in range(2):
        for name, solver in SOLVERS.items():
            sim.model.opt.solver = solver
            c, s = _cpu(lambda: [rollout(sim, world.terrain(int(x)), ctl, world.rollout_config,
                                         needs_depth=False).cost for x in seeds])
            cpu[name] += s
            costs[name] = c
    sim.model.opt.solver = model_solver
    return {name: {"cpu_ratio_to_newton": round(cpu[name] / cpu["newton"], 3),
                   "mean_cost": round(float(np.mean(costs[name])), 4),
                   "costs_identical_to_newton": costs[name] == costs["newton"]}
            for name in SOLVERS} | {"model_solver": model_solver}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--terrains", type=int, default=6)
    ap.add_argument("--policies", type=int, default=4)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--first-seed", type=int, default=FIRST_SEED)
    ap.add_argument("--save", action="store_true")
    args = ap.parse_args(argv)
    try:
        out = run(args)
    except _BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    text = json.dumps(out)
    print(text)
    if args.save:
        SAVE.write_text(text + "\n")
    return 0


def run(args: argparse.Namespace) -> dict:
    from pacplan.errors import PacplanError

    for name in ("terrains", "policies", "epochs"):
        if getattr(args, name) < 1:
            raise _BenchError(f"--{name} must be at least 1, got {getattr(args, name)}")
    lo, hi = args.first_seed, args.first_seed + args.terrains
    try:
        from pacplan.presets import seed_ranges
        from pacplan.worlds.quadruped import QuadrupedWorld
        from pacplan.worlds.quadruped.teacher import check_teacher_request

        check_teacher_request("quadruped", OPTIONS, (lo, hi), seed_ranges("quadruped"))
    except PacplanError as exc:
        raise _BenchError(str(exc)) from exc
    import torch

    torch.set_num_threads(1)
    seeds = np.arange(lo, hi, dtype=np.int64)
    world = QuadrupedWorld(**OPTIONS)
    cert, mu = certification(world, seeds, args.policies)
    out = {"benchmark": "quadruped_stage_speed", "world": OPTIONS, "terrains": [lo, hi],
           "certification": cert, "teacher": teacher(world, seeds),
           "distillation": distillation(world, seeds, mu, args.epochs),
           "inside_a_rollout": inside_a_rollout(world, int(seeds[0])),
           "solvers": solvers(world, seeds)}
    world.close()
    return out


if __name__ == "__main__":
    raise SystemExit(main())
