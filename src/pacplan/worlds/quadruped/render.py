"""`pacplan render quadruped`: terrain profile with the walked torso path, and the depth image."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pacplan.io.plotting import depth_colorbar, draw_depth, pyplot, save_figure
from pacplan.io.weights import load_theta
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import (
    RolloutResult,
    fixed_gait_controller,
    policy_controller,
)
from pacplan.worlds.quadruped.terrain import Terrain
from pacplan.worlds.quadruped.world import QuadrupedWorld


def walk(
    seed: int, theta: np.ndarray | None = None, world: QuadrupedWorld | None = None
) -> RolloutResult:
    """Record one rollout (the reference gait when `theta` is None)."""
    w = world or QuadrupedWorld()
    controller = (
        fixed_gait_controller(REFERENCE_GAIT) if theta is None else policy_controller(theta)
    )
    return w.run(controller, seed, record=True)  # the world's own episode and cost rule


def render_figure(seed: int, out: str, theta_path: str | None = None,
                  world_options: dict | None = None) -> str:
    """Draw the terrain of `seed` with the torso path and the first depth image; return the
    PNG path."""
    plt = pyplot()

    world = QuadrupedWorld(**(world_options or {}))  # a run's options (slopes, physics)
    theta = load_theta(theta_path, POLICY_DIM, "quadruped") if theta_path else None
    result = walk(seed, theta, world)
    terrain = world.terrain(seed)
    who = "reference gait" if theta is None else Path(theta_path or "").name
    if world.engine != "bullet":
        who += f", {world.engine}"

    fig = plt.figure(figsize=(12, 4.0), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=[3.0, 1], height_ratios=[2, 1])
    side = fig.add_subplot(grid[0, 0])
    _draw_side_view(side, terrain, result, world.rollout_config.finish_dx)
    outcome = ("ended by an unreadable observation (sensor fault)" if result.sensor_fault
               else "fell" if result.fell else "reached the finish line" if result.finished
               else "stopped short of the finish line")
    side.set_title(
        f"quadruped seed {seed} ({who}): {outcome}, Δx = {result.dx:.2f} m in "
        f"{result.sim_time:.1f} s, cost {result.cost:.3f}",
        fontsize=10,
    )
    _draw_top_view(fig.add_subplot(grid[1, 0], sharex=side), terrain, result)
    _draw_depth(fig, fig.add_subplot(grid[:, 1]), result, world.camera.far_m)
    return str(save_figure(fig, out, dpi=120, crop=True))


def _draw_side_view(ax: Any, terrain: Terrain, result: RolloutResult, finish_dx: float) -> None:
    """Terrain profile, torso height along the walk, the finish line and where the walk ended."""
    xs = np.linspace(-0.5, 10.5, 1101)
    hs = terrain.height(xs)
    ax.fill_between(xs, hs, -0.1, color="0.75", label="terrain")
    ax.plot(xs, hs, color="0.3", lw=1)
    ax.plot(result.path[:, 1], result.path[:, 3], color="tab:blue", lw=1.5, label="torso")
    ax.axvline(float(result.path[0, 1]) + finish_dx, color="tab:green", ls="--", lw=1,
               label="finish line")
    end = result.path[-1]
    marker = "x" if result.fell else "o"
    ax.plot(end[1], end[3], marker, color="tab:red", ms=8, label="fall" if result.fell else "end")
    ax.set_xlim(-0.5, 10.5)
    ax.set_ylim(-0.1, max(0.6, float(hs.max()) + 0.35))
    ax.set_ylabel("z (m)")
    ax.legend(loc="upper right", fontsize=8, ncol=4)


def _draw_top_view(ax: Any, terrain: Terrain, result: RolloutResult) -> None:
    """The torso path seen from above, with the ridge crests."""
    ax.plot(result.path[:, 1], result.path[:, 2], color="tab:blue", lw=1.5)
    for crest in terrain.ridge_starts + terrain.plank_length:
        ax.axvline(crest, color="0.85", lw=0.8)
    ax.axhline(0.0, color="0.5", lw=0.5)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    reach = max(0.5, float(np.abs(result.path[:, 2]).max()) + 0.2)  # keep a veering path in view
    ax.set_ylim(-reach, reach)


def _draw_depth(fig: Any, ax: Any, result: RolloutResult, far_m: float) -> None:
    """The torso camera's first depth image, in the convention of
    `pacplan.io.plotting.draw_depth` (bright near, dark at the far value, which the sky reads)."""
    depth = result.first_depth if result.first_depth is not None else np.zeros((50, 50))
    im = draw_depth(ax, depth, far_m)
    ax.set_title(f"torso camera at t = 0 (far {far_m:g} m)", fontsize=10)
    depth_colorbar(fig, im, ax, fraction=0.046, pad=0.02)
