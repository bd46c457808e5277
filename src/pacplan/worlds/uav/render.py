"""`pacplan render uav`: a figure of one flight for eyeballing the world and for reports.

Top view (x–y) and side view (y–z) of the tunnel and cylinders with the flown trajectory and the
collision point, and the depth images at the first and at the last decision with the Depth
Filter's 5x5 cells and the chosen primitive's cell highlighted (depth drawn in the one
convention of `pacplan.io.plotting.draw_depth`: bright near, dark at the camera's far distance).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.plotting import depth_colorbar, draw_depth, pyplot, save_figure
from pacplan.io.weights import load_theta as load_policy_weights
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.policy_np import NumpyPolicy
from pacplan.worlds.uav.scene import Scene

# How far below the best (float64) score the flown primitive's may be: flights score in
# float32, whose rounding parts near-ties by ~1e-7 m (measured on the shipped prior's policies).
FLOWN_SCORE_TOL_M = 1e-4

if TYPE_CHECKING:
    from pacplan.worlds.uav.world import Trajectory


def load_theta(path: str | Path, dim: int = spec.POLICY_DIM, what: str = "UAV") -> np.ndarray:
    """This world's θ (`dim` weights: the policy family's) from .npy or .safetensors (see
    `pacplan.io.weights.load_theta`)."""
    return load_policy_weights(path, dim, what)


def _clipped_axis(scene: Scene, i: int) -> tuple[np.ndarray, np.ndarray] | None:
    """End points of cylinder i's axis clipped to the tunnel box (x in ±5, z in [0, 4])."""
    c, a = scene.centres[i], scene.axes[i]
    lo, hi = -spec.OBST_HALF, spec.OBST_HALF
    for dim, (bmin, bmax) in ((0, (-spec.WALL_X, spec.WALL_X)), (2, (spec.FLOOR_Z, spec.CEIL_Z))):
        if abs(a[dim]) < 1e-12:
            if not bmin <= c[dim] <= bmax:
                return None
            continue
        t1, t2 = sorted(((bmin - c[dim]) / a[dim], (bmax - c[dim]) / a[dim]))
        lo, hi = max(lo, t1), min(hi, t2)
    if lo >= hi:
        return None
    return c + lo * a, c + hi * a


def silhouette(scene: Scene, i: int, dims: tuple[int, int]) -> np.ndarray | None:
    """2-D outline (convex hull) of the clipped cylinder i projected on axes `dims`."""
    from scipy.spatial import ConvexHull

    ends = _clipped_axis(scene, i)
    if ends is None:
        return None
    a, r = scene.axes[i], scene.radii[i]
    u = np.cross(a, [1.0, 0.0, 0.0] if abs(a[0]) < 0.9 else [0.0, 1.0, 0.0])
    u /= np.linalg.norm(u)
    v = np.cross(a, u)
    ang = np.linspace(0, 2 * np.pi, 24, endpoint=False)
    ring = r * (np.cos(ang)[:, None] * u + np.sin(ang)[:, None] * v)
    pts = np.concatenate([ends[0] + ring, ends[1] + ring])[:, dims]
    hull = ConvexHull(pts)
    return pts[hull.vertices]


def render_figure(seed: int, out: str | Path, theta_path: str | None = None,
                  world_options: dict | None = None) -> str:
    """Draw environment `seed` flown by θ from theta_path (None: Depth Filter only)."""
    plt = pyplot()

    from pacplan.worlds.uav.world import UAVWorld

    # the run's options (net_scale, use_net, policy); eager rendering is faster for one flight
    world = UAVWorld(**{**(world_options or {}), "compile": False})
    what = "UAV" if world.family.is_paper else f"UAV {world.family.label()}"
    theta = None if theta_path is None else load_theta(theta_path, world.policy_dim(), what)
    tr = world.trajectory(theta, int(seed))

    # Panels sized to their content (top view 10 x 17 m, side view 17 x 4 m, square depth
    # images), so the cropped figure has little empty space.
    fig = plt.figure(figsize=(11.0, 6.0), layout="constrained")
    outer = fig.add_gridspec(1, 2, width_ratios=[1.0, 2.35])
    ax_top = fig.add_subplot(outer[0])
    right = outer[1].subgridspec(2, 1, height_ratios=[1.0, 1.9])
    ax_side = fig.add_subplot(right[0])
    images = right[1].subgridspec(1, 2)
    ax_img = [fig.add_subplot(images[0]), fig.add_subplot(images[1])]
    _draw_views(ax_top, ax_side, tr)
    _draw_decisions(fig, ax_img, tr, NumpyPolicy(theta, world.net_scale, world.family))

    who = "Depth Filter only (no θ)" if theta is None else f"θ from {Path(theta_path).name}"
    outcome = (
        f"collision at t = {tr.checks * spec.CHECK_DT:.2f} s"
        if tr.checks
        else "no collision in 12 s"
    )
    fig.suptitle(
        f"UAV world, seed {seed}: {outcome}, cost = {tr.cost:.4f}\n"
        f"policy: {who} (net scale {world.net_scale:g} m); primitives flown: "
        f"{', '.join(str(int(p)) for p in tr.prims)}",
        fontsize=10,
    )
    return str(save_figure(fig, out, dpi=110, crop=True))


def _draw_views(ax_top: Any, ax_side: Any, tr: Trajectory) -> None:
    """Top (x–y) and side (y–z) views: cylinders, the flown path, decisions, the collision."""
    from matplotlib.patches import Circle, Polygon

    ylim = (-1.0, 16.0)
    for ax, dims, xlim, yl in (
        (ax_top, (0, 1), (-spec.WALL_X, spec.WALL_X), ylim),
        (ax_side, (1, 2), ylim, (spec.FLOOR_Z, spec.CEIL_Z)),
    ):
        for i in range(spec.N_OBSTACLES):
            poly = silhouette(tr.scene, i, dims)
            if poly is not None:
                ax.add_patch(Polygon(poly, closed=True, color="0.45", alpha=0.6, lw=0))
        ax.plot(
            tr.positions[:, dims[0]],
            tr.positions[:, dims[1]],
            "-",
            color="tab:blue",
            lw=2,
            label="flown path",
        )
        ax.plot(tr.decisions[:, dims[0]], tr.decisions[:, dims[1]], "o", color="tab:blue", ms=3)
        if tr.collision_point is not None:
            cp = tr.collision_point
            ax.add_patch(
                Circle(
                    (cp[dims[0]], cp[dims[1]]),
                    spec.ROBOT_RADIUS,
                    fill=False,
                    color="tab:red",
                    lw=1.5,
                )
            )
            ax.plot(cp[dims[0]], cp[dims[1]], "x", color="tab:red", ms=10, mew=2, label="collision")
        ax.set_xlim(*xlim)
        ax.set_ylim(*yl)
        ax.set_aspect("equal")
    ax_top.set_xlabel("x [m]")
    ax_top.set_ylabel("y [m] (forward)")
    ax_top.set_title("top view")
    ax_top.legend(loc="lower left", fontsize=8)
    ax_side.set_xlabel("y [m] (forward)")
    ax_side.set_ylabel("z [m]")
    ax_side.set_title("side view")


def _draw_decisions(fig: Any, ax_img: list[Any], tr: Trajectory, policy: NumpyPolicy) -> None:
    """Depth at the first and last decisions with the Depth Filter cells, the flown one red
    (the depth convention of `pacplan.io.plotting.draw_depth`, one shared colorbar)."""
    from matplotlib.patches import Rectangle

    from pacplan.worlds.uav.batched import BatchedScene

    steps = [0, len(tr.decisions) - 1] if len(tr.decisions) > 1 else [0, 0]
    camera = BatchedScene()
    camera.load(tr.scene)
    images = camera.render(tr.decisions[steps])
    cells = spec.filter_cells()
    offs = spec.primitive_offsets()
    im = None
    for ax, step, img in zip(ax_img, steps, images, strict=True):
        im = draw_depth(ax, img, spec.FAR)
        chosen = int(tr.prims[step])
        for k, (r, c) in enumerate(cells):
            hot = k == chosen
            ax.add_patch(
                Rectangle(
                    (c - 0.5, r - 0.5),
                    spec.CELL,
                    spec.CELL,
                    fill=False,
                    ec="red" if hot else "0.25",  # readable on bright and dark depth
                    lw=2 if hot else 0.6,
                )
            )
        dx, dz = offs[chosen]
        ax.set_title(
            f"decision {step + 1}: primitive {chosen}\n(dx = {dx:+.1f}, dz = {dz:+.1f})",
            fontsize=9,
        )
        # The figure shows the decision actually flown: the independent float64 scores must
        # rank it best, up to the float32 rounding it was flown with (near-ties part there).
        scores = policy.scores(img)
        if scores.max() - scores[chosen] > FLOWN_SCORE_TOL_M:
            raise PacplanError(f"seed {tr.seed}, decision {step + 1}: primitive {chosen} was "
                               f"flown, but its score is {scores.max() - scores[chosen]:.3g} m "
                               "below the best in the numpy check: the two policy paths disagree")
    depth_colorbar(fig, im, ax_img, shrink=0.9, pad=0.02)
