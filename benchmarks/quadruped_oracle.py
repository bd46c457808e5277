"""pacplan's Bullet quadruped against pybullet_envs' own MinitaurGymEnv, terrain by terrain.

    nice python benchmarks/quadruped_oracle.py [--terrains 80] [--first-seed 9000000]

Why: pacplan assembles the paper's robot itself (URDF, flags, knee pins, PD law, reset, fall
rule), so a mistake there would change every certified number silently. The oracle is code no
one here wrote: pybullet_envs' `MinitaurGymEnv` configured exactly as the paper's
`envs/Minitaur_Env.py` configures it (benchmarks/quadruped_oracle_env.py, which imports nothing
from pacplan). It runs in its own venv with pybullet_envs' dependencies (pybullet 3.2.7,
gym 0.25.2, protobuf 3.20.3, setuptools < 81, numpy < 2), built once and cached in
$PACPLAN_ORACLE_VENV or ~/.cache/pacplan/quadruped-oracle-venv (outside the repository).

Both sides walk the open-loop reference gait (a1 = a2 = 0.5, a_st = 0, ω = 30 rad/s, clock at
simulated time) on the same terrains: pacplan's heightfield, passed to the oracle as the exact
arguments of PyBullet's heightfield (the oracle removes its plane). Compared per terrain: Δx,
cost, fall (torso up · world up < 0.3). Goals on ≥ 80 terrains: mean cost within ±0.03, fall rate
within ±5 points, median per-terrain |Δx difference| ≤ 0.3 m.

What pacplan does differently, on purpose (so a single rollout may differ; the goals are on
distributions and medians): pybullet_envs holds each PD target for its action repeat (5 physics
steps) where pacplan re-evaluates the gait at every physics step; pybullet_envs settles the
robot at motor angles π/2 for 0.2 s and then 0.05 s at the gait's neutral pose, pacplan 0.25 s
at the neutral pose.

`--paper-timing` also walks pacplan's robot with those two differences removed (a benchmark-only
simulator: the same settling as pybullet_envs, each gait target held for 5 physics steps), which
measures what they account for and what remains.

Prints ONE JSON object. Exit status 2 (with a one-line reason on stderr) when the oracle venv
cannot be built (e.g. no network).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pybullet

import pacplan.worlds.quadruped.sim as sim_module
from pacplan.worlds.quadruped.gait import NEUTRAL_MOTOR_ANGLES, REFERENCE_GAIT, gait_motor_angles
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout
from pacplan.worlds.quadruped.sim import MinitaurSim
from pacplan.worlds.quadruped.terrain import GRID_DY_M, Terrain, grid_axes, heights_on_grid
from pacplan.worlds.quadruped.world import QuadrupedWorld

FIRST_SEED = 9_000_000  # far from every preset's and test's seeds
ORACLE_REQUIREMENTS = ("pybullet==3.2.7", "gym==0.25.2", "protobuf==3.20.3", "setuptools<81",
                       "numpy<2")
WORKER = Path(__file__).with_name("quadruped_oracle_env.py")
GOALS = {"mean_cost_abs_diff": 0.03, "fall_rate_abs_diff": 0.05, "median_abs_dx_diff_m": 0.3}
_MARKER = ".pacplan-oracle-ready"


class OracleUnavailable(RuntimeError):
    """The oracle venv could not be built (no network, no pip): callers skip, not fail."""


def oracle_venv() -> Path:
    """Where the oracle venv lives (outside the repository)."""
    env = os.environ.get("PACPLAN_ORACLE_VENV")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "pacplan" / "quadruped-oracle-venv"


def ensure_oracle_python(venv: Path | None = None, timeout_s: float = 600.0) -> Path:
    """The oracle venv's python, building the venv first if it is not there (once, cached)."""
    venv = venv or oracle_venv()
    python = venv / "bin" / "python"
    if (venv / _MARKER).is_file() and python.exists():
        return python
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True,
                       capture_output=True, timeout=timeout_s)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--timeout", "20", "--retries", "1", *ORACLE_REQUIREMENTS],
                       check=True, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        detail = getattr(exc, "stderr", "") or str(exc)
        last = detail.strip().splitlines()[-1] if detail.strip() else type(exc).__name__
        raise OracleUnavailable(f"cannot build the oracle venv at {venv}: {last}") from exc
    (venv / _MARKER).write_text(" ".join(ORACLE_REQUIREMENTS) + "\n")
    return python


def heightfield_args(world: QuadrupedWorld, seed: int) -> dict[str, Any]:
    """The exact heightfield pacplan's Bullet world builds for terrain `seed` (scene.build_terrain),
    as plain JSON for the oracle."""
    terrain = world.terrain(seed)
    xs, ys = grid_axes(terrain.plank_length)
    heights = heights_on_grid(terrain)
    return {
        "seed": int(seed),
        "mesh_scale": [terrain.plank_length, GRID_DY_M, 1.0],
        "heights": [float(h) for h in heights.reshape(-1)],
        "rows": len(xs),
        "columns": len(ys),
        "base_position": [0.5 * (xs[0] + xs[-1]), 0.5 * (ys[0] + ys[-1]),
                          0.5 * (float(heights.min()) + float(heights.max()))],
    }


def run_oracle(seeds: list[int], python: Path | None = None) -> list[dict[str, Any]]:
    """pybullet_envs' outcomes of the reference gait on pacplan's terrains `seeds`."""
    python = python or ensure_oracle_python()
    world = QuadrupedWorld()
    g = REFERENCE_GAIT
    request = {
        "terrains": [heightfield_args(world, s) for s in seeds],
        "gait": [g.a1, g.a2, g.a_st, g.omega],
        "finish_dx": world.rollout_config.finish_dx,
        "horizon_s": world.rollout_config.horizon_s,
    }
    done = subprocess.run([str(python), str(WORKER)], input=json.dumps(request), text=True,
                          capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the oracle failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


ACTION_REPEAT = 5  # pybullet_envs' physics steps per control step with PD control
SETTLE_HALF_PI_STEPS = 100  # pybullet_envs' Minitaur.Reset: motors held at π/2
SETTLE_ZERO_ACTIONS = 5  # the paper's execute_policy: five zero leg-model actions


class PaperTimingSim(MinitaurSim):
    """pacplan's Bullet simulator with pybullet_envs' timing (benchmark only, never a world
    option): its settling, and each gait target held for `ACTION_REPEAT` physics steps."""

    def reset(self, terrain: Terrain) -> None:
        physics = self.physics
        self.physics = dataclasses.replace(physics, settle_s=0.0)
        try:
            super().reset(terrain)
        finally:
            self.physics = physics
        half_pi = [math.pi / 2] * 8
        for target in [half_pi] * SETTLE_HALF_PI_STEPS + \
                [NEUTRAL_MOTOR_ANGLES] * (SETTLE_ZERO_ACTIONS * ACTION_REPEAT):
            self._apply_pd(np.asarray(target))
            pybullet.stepSimulation(physicsClientId=self.cid)

    def run_primitive(self, params: Any, duration_s: float, finish_x: float | None = None,
                      record_path: bool = False) -> Any:
        dt = self.physics.time_step

        def held(p: Any, phases: np.ndarray) -> np.ndarray:
            # pacplan evaluates the gait at the end of each physics step (φ0 + ω·dt·j); this
            # evaluates it at the start of each control step and holds it
            j = np.arange(1, phases.size + 1)
            start = phases[0] - p.omega * dt
            return gait_motor_angles(p, start + p.omega * dt * ACTION_REPEAT
                                     * ((j - 1) // ACTION_REPEAT))

        with _patched(sim_module, "gait_motor_angles", held):
            return super().run_primitive(params, duration_s, finish_x, record_path)


@contextlib.contextmanager
def _patched(module: Any, name: str, value: Any) -> Any:
    old = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, old)


def run_pacplan(seeds: list[int], paper_timing: bool = False,
                **options: Any) -> list[dict[str, Any]]:
    """pacplan's Bullet outcomes of the reference gait on terrains `seeds` (with
    `paper_timing`, through `PaperTimingSim`)."""
    world = QuadrupedWorld(**options)
    sim = PaperTimingSim(world.physics, world.camera) if paper_timing else world.sim
    gait = fixed_gait_controller(REFERENCE_GAIT)
    out = []
    for s in seeds:
        r = rollout(sim, world.terrain(s), gait, world.rollout_config, needs_depth=False)
        out.append({"seed": int(s), "dx": r.dx, "fell": r.fell, "finished": r.finished,
                    "cost": r.cost, "sim_s": r.sim_time})
    sim.close()
    world.close()
    return out


def compare(oracle: list[dict[str, Any]], ours: list[dict[str, Any]]) -> dict[str, Any]:
    """Distribution and per-terrain agreement, with the goals."""
    o_cost = np.array([r["cost"] for r in oracle])
    p_cost = np.array([r["cost"] for r in ours])
    o_fell = np.array([r["fell"] for r in oracle], dtype=float)
    p_fell = np.array([r["fell"] for r in ours], dtype=float)
    ddx = np.abs(np.array([r["dx"] for r in oracle]) - np.array([r["dx"] for r in ours]))
    figures = {
        "mean_cost_abs_diff": float(abs(o_cost.mean() - p_cost.mean())),
        "fall_rate_abs_diff": float(abs(o_fell.mean() - p_fell.mean())),
        "median_abs_dx_diff_m": float(np.median(ddx)),
    }
    return {
        "oracle": {"mean_cost": round(float(o_cost.mean()), 4),
                   "fall_rate": round(float(o_fell.mean()), 4),
                   "finish_rate": round(float(np.mean([r["finished"] for r in oracle])), 4),
                   "up_dot_below_0_5_rate": None if any(
                       math.isnan(r["min_up_dot"]) for r in oracle) else round(float(np.mean(
                           [r["min_up_dot"] < 0.5 for r in oracle])), 4)},
        "pacplan": {"mean_cost": round(float(p_cost.mean()), 4),
                    "fall_rate": round(float(p_fell.mean()), 4),
                    "finish_rate": round(float(np.mean([r["finished"] for r in ours])), 4)},
        "per_terrain": {"abs_dx_diff_m_quantiles": {
            f"q{q}": round(float(np.quantile(ddx, q / 100)), 3) for q in (25, 50, 75, 90)},
            "same_fall_outcome": round(float(np.mean(o_fell == p_fell)), 4),
            "cost_correlation": round(float(np.corrcoef(o_cost, p_cost)[0, 1]), 3)
            if o_cost.std() > 0 and p_cost.std() > 0 else None},
        "figures": {k: round(v, 4) for k, v in figures.items()},
        "goals": {k: {"limit": GOALS[k], "met": bool(figures[k] <= GOALS[k])} for k in GOALS},
    }


def _oracle_from(path: str, seeds: list[int]) -> list[dict[str, Any]]:
    """The oracle's outcomes on `seeds` as recorded in an earlier output's rows."""
    with open(path, encoding="utf-8") as fh:
        rows = {r["seed"]: r for r in json.load(fh)["rows"]}
    missing = [s for s in seeds if s not in rows]
    if missing:
        raise SystemExit(f"--reuse-oracle {path}: no oracle row for seeds {missing[:3]}...")
    return [{"seed": s, "dx": rows[s]["oracle_dx"], "fell": rows[s]["oracle_fell"],
             "finished": rows[s]["oracle_dx"] >= 6.0,
             "cost": min(1.0, max(0.0, 1.0 - rows[s]["oracle_dx"] / 6.0)),
             "min_up_dot": rows[s].get("oracle_min_up_dot", float("nan"))} for s in seeds]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--terrains", type=int, default=80)
    ap.add_argument("--first-seed", type=int, default=FIRST_SEED)
    ap.add_argument("--robot", default="derpy", help="pacplan's robot (minitaur: the old one)")
    ap.add_argument("--paper-timing", action="store_true",
                    help="also walk pacplan's robot with pybullet_envs' settling and action repeat")
    ap.add_argument("--reuse-oracle", metavar="JSON",
                    help="take the oracle's outcomes from an earlier output of this script")
    args = ap.parse_args(argv)
    seeds = list(range(args.first_seed, args.first_seed + args.terrains))
    t0 = time.perf_counter()
    if args.reuse_oracle:
        oracle = _oracle_from(args.reuse_oracle, seeds)
        t1 = t2 = time.perf_counter()
    else:
        try:
            python = ensure_oracle_python()
        except OracleUnavailable as exc:
            print(str(exc), file=sys.stderr)
            return 2
        t1 = time.perf_counter()
        oracle = run_oracle(seeds, python)
        t2 = time.perf_counter()
    ours = run_pacplan(seeds, robot=args.robot)
    t3 = time.perf_counter()
    extra = {}
    if args.paper_timing:
        timed = run_pacplan(seeds, paper_timing=True, robot=args.robot)
        extra["pacplan_with_paper_timing"] = {
            **{k: v for k, v in compare(oracle, timed).items() if k != "oracle"},
            "dx_m": [round(r["dx"], 3) for r in timed]}
    result = {
        "benchmark": "quadruped_oracle",
        "terrains": len(seeds),
        "seeds": [seeds[0], seeds[-1] + 1],
        "gait": "reference (a1 = a2 = 0.5, a_st = 0, omega = 30 rad/s)",
        "pacplan_robot": args.robot,
        **compare(oracle, ours),
        **extra,
        "rows": [{"seed": o["seed"], "oracle_dx": round(o["dx"], 3),
                  "pacplan_dx": round(p["dx"], 3), "oracle_fell": o["fell"],
                  "pacplan_fell": p["fell"], "oracle_min_up_dot": round(o["min_up_dot"], 4)}
                 for o, p in zip(oracle, ours, strict=True)],
        "wall_s": {"venv": round(t1 - t0, 1), "oracle": round(t2 - t1, 1),
                   "pacplan": round(t3 - t2, 1)},
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
