"""Bullet vs MuJoCo on the quadruped: the reference gait's outcome distribution. ONE JSON object.

    nice -n 10 python benchmarks/quadruped_engines.py [--terrains 200] [--robot derpy]
        [--out engines.png]

The open-loop reference gait (a1 = a2 = 0.5, ω = 30 rad/s) walks terrains whose seeds start at
9,000,000 (far from every preset's and test's seeds, and from the calibration's seeds 100-139, so
the comparison is not tuned on terrains used anywhere else) in both engines with the same robot
(the Derpy by default): PyBullet, and MuJoCo with the robot's calibrated contact from
`pacplan.worlds.quadruped.mjcf`. Walking is chaotic, so single rollouts may differ; the
distributions are what must agree. Reported: mean cost, fall rate, finish rate, Δx quantiles,
the median per-terrain |Δx difference|, flat-ground Δx (10 s, finish line out of reach), the
goals (mean cost within ±0.03, fall rate within ±10 points, flat-ground Δx within 5 %) and a
histogram figure.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import numpy as np

from pacplan.worlds.quadruped.episode import RolloutConfig
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT
from pacplan.worlds.quadruped.mjcf import default_contact
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout
from pacplan.worlds.quadruped.world import QuadrupedWorld

FIRST_SEED = 9_000_000
QUANTILES = (0.05, 0.25, 0.5, 0.75, 0.95)


def _walk(engine: str, seeds: list[int], robot: str = "derpy") -> dict[str, Any]:
    """The reference gait on each terrain; per-rollout Δx, cost, fall and CPU seconds."""
    world = QuadrupedWorld(physics=engine, robot=robot)
    gait = fixed_gait_controller(REFERENCE_GAIT)
    c0 = time.process_time()
    rs = [rollout(world.sim, world.terrain(s), gait, world.rollout_config, needs_depth=False)
          for s in seeds]
    cpu = time.process_time() - c0
    flat_world = QuadrupedWorld(physics=engine, max_slope_deg=0.0, robot=robot)
    flat = rollout(flat_world.sim, flat_world.terrain(seeds[0]), gait,
                   RolloutConfig(finish_dx=1e6), needs_depth=False)
    world.close()
    flat_world.close()
    dx = np.array([r.dx for r in rs])
    return {
        "dx": dx,
        "cost": np.array([r.cost for r in rs]),
        "fell": np.array([r.fell for r in rs]),
        "finished": np.array([r.finished for r in rs]),
        "flat_dx": flat.dx,
        "cpu_s": cpu,
    }


def _summary(run: dict[str, Any]) -> dict[str, Any]:
    dx = run["dx"]
    return {
        "mean_cost": round(float(run["cost"].mean()), 4),
        "fall_rate": round(float(run["fell"].mean()), 4),
        "finish_rate": round(float(run["finished"].mean()), 4),
        "dx_mean_m": round(float(dx.mean()), 3),
        "dx_std_m": round(float(dx.std()), 3),
        "dx_quantiles_m": {f"q{int(q * 100):02d}": round(float(np.quantile(dx, q)), 3)
                           for q in QUANTILES},
        "flat_ground_dx_m": round(float(run["flat_dx"]), 3),
        "cpu_s_total": round(run["cpu_s"], 1),
    }


def _figure(bullet: dict[str, Any], mujoco: dict[str, Any], path: str) -> str:
    from pacplan.io.plotting import pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    bins = np.linspace(-0.5, 6.5, 29)
    for run, name, colour in ((bullet, "PyBullet", "tab:blue"), (mujoco, "MuJoCo", "tab:orange")):
        axes[0].hist(run["dx"], bins=bins, histtype="step", lw=1.8, color=colour,
                     label=f"{name}: mean cost {run['cost'].mean():.3f}, "
                           f"falls {100 * run['fell'].mean():.0f} %")
        xs = np.sort(run["dx"])
        axes[1].plot(xs, np.arange(1, xs.size + 1) / xs.size, color=colour, lw=1.8, label=name)
    axes[0].set_xlabel("Δx in 10 s (m); 6 m is the finish line")
    axes[0].set_ylabel("terrains")
    axes[0].legend(fontsize=8)
    axes[1].set_xlabel("Δx (m)")
    axes[1].set_ylabel("fraction of terrains ≤ Δx")
    axes[1].legend(fontsize=8)
    n = bullet["dx"].size
    fig.suptitle(f"reference gait on {n} terrains (seeds {FIRST_SEED}+, 23.3°)", fontsize=10)
    return str(save_figure(fig, path, dpi=120))


def main() -> None:
    parser = argparse.ArgumentParser(description="Bullet vs MuJoCo outcome distributions")
    parser.add_argument("--terrains", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=FIRST_SEED)
    parser.add_argument("--out", default="quadruped_engines.png", help="histogram PNG")
    parser.add_argument("--robot", default="derpy", choices=("derpy", "minitaur"))
    args = parser.parse_args()
    seeds = list(range(args.first_seed, args.first_seed + args.terrains))
    load = os.getloadavg()
    bullet = _walk("bullet", seeds, args.robot)
    mujoco = _walk("mujoco", seeds, args.robot)
    contact = default_contact(args.robot)
    b, m = _summary(bullet), _summary(mujoco)
    goals = {
        "mean_cost_within_0.03": abs(m["mean_cost"] - b["mean_cost"]) <= 0.03,
        "fall_rate_within_10_points": abs(m["fall_rate"] - b["fall_rate"]) <= 0.10,
        "flat_ground_dx_within_5_percent":
            abs(m["flat_ground_dx_m"] / b["flat_ground_dx_m"] - 1.0) <= 0.05,
    }
    out = {
        "terrains": f"seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}), max slope 23.3°, 0.5 m planks",
        "gait": "a1=a2=0.5, a_st=0, omega=30 rad/s, open loop, no depth rendered",
        "robot": args.robot,
        "bullet": {"model": "PyBullet", **b},
        "mujoco": {"model": f"MuJoCo, calibrated foot contact solref={contact.foot_solref}, "
                             f"solimp={contact.foot_solimp}, no mounted pairs", **m},
        "differences": {
            "mean_cost": round(m["mean_cost"] - b["mean_cost"], 4),
            "fall_rate": round(m["fall_rate"] - b["fall_rate"], 4),
            "flat_ground_dx_ratio": round(m["flat_ground_dx_m"] / b["flat_ground_dx_m"], 4),
            "median_per_terrain_abs_dx_m": round(float(np.median(
                np.abs(mujoco["dx"] - bullet["dx"]))), 3),
            "same_fall_outcome": round(float(np.mean(mujoco["fell"] == bullet["fell"])), 4),
        },
        "goals_met": goals,
        "figure": _figure(bullet, mujoco, args.out),
        "loadavg_before": [round(x, 2) for x in load],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
