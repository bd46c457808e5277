"""The frame `UAVObstacleFieldEnv.render()` returns: the tunnel from above and from the side with
the path flown so far, and the depth image the robot sees now.

Made to be cheap enough for a video of every step: the figure and its artists are built once per
env, the cylinders' outlines once per scene (the figure `pacplan render uav` draws is the same
geometry, `render.silhouette`), and a frame only moves lines and swaps the image (about 30 ms).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pacplan.worlds.as_gym import FRAME_SIZE_PX, depth_panel, figure_rgb, frame_figure
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.render import silhouette
from pacplan.worlds.uav.scene import Scene

_Y_SPAN = (-1.0, 16.0)  # forward: the start to past the 15 m a full flight covers
_WIDTH_PX, _HEIGHT_PX = FRAME_SIZE_PX
_M_TO_W = 0.5 / (_Y_SPAN[1] - _Y_SPAN[0])  # figure width per metre: 17 m on half the width
_M_TO_H = _M_TO_W * _WIDTH_PX / _HEIGHT_PX  # the same scale vertically (equal aspect)
_SIDE_RECT = (0.08, 0.11, 0.5, (spec.CEIL_Z - spec.FLOOR_Z) * _M_TO_H)
_TOP_RECT = (0.08, _SIDE_RECT[1] + _SIDE_RECT[3] + 0.04, 0.5, 2 * spec.WALL_X * _M_TO_H)
_DEPTH_RECT = (0.62, 0.08, 0.26, 0.26 * _WIDTH_PX / _HEIGHT_PX)


class _View:
    """One projection of the tunnel: cylinders, the flown path, decision points, the robot."""

    def __init__(self, fig: Any, rect: tuple[float, float, float, float],
                 dims: tuple[int, int], vlim: tuple[float, float], vlabel: str) -> None:
        from matplotlib.patches import Circle

        self.dims = dims
        self.ax = ax = fig.add_axes(rect)
        ax.set_xlim(*_Y_SPAN)
        ax.set_ylim(*vlim)
        ax.set_ylabel(vlabel, fontsize=8)
        ax.tick_params(labelsize=7)
        self.cylinders: Any = None
        (self.path,) = ax.plot([], [], "-", color="tab:blue", lw=1.5)
        (self.marks,) = ax.plot([], [], "o", color="tab:blue", ms=2.5)
        self.robot = Circle((0.0, 0.0), spec.ROBOT_RADIUS, fill=False, color="tab:blue", lw=1.2)
        ax.add_patch(self.robot)
        (self.hit,) = ax.plot([], [], "x", color="tab:red", ms=8, mew=2)

    def set_scene(self, scene: Scene) -> None:
        """Draw the scene's cylinders (replacing the previous scene's)."""
        from matplotlib.collections import PatchCollection
        from matplotlib.patches import Polygon

        if self.cylinders is not None:
            self.cylinders.remove()
        outlines = (silhouette(scene, i, self.dims) for i in range(spec.N_OBSTACLES))
        patches = [Polygon(p, closed=True) for p in outlines if p is not None]
        self.cylinders = PatchCollection(patches, color="0.45", alpha=0.6, lw=0, zorder=0)
        self.ax.add_collection(self.cylinders)

    def set_flight(self, points: np.ndarray, decisions: np.ndarray, collided: bool) -> None:
        """Show the path through `points`, the decision points and the robot at the last point."""
        h, v = self.dims
        self.path.set_data(points[:, h], points[:, v])
        self.marks.set_data(decisions[:, h], decisions[:, v])
        end = points[-1]
        self.robot.center = (end[h], end[v])
        self.robot.set_edgecolor("tab:red" if collided else "tab:blue")
        self.hit.set_data([end[h]] if collided else [], [end[v]] if collided else [])


class UAVFrame:
    """Draws the env's frames on one fixed-size figure (`as_gym.FRAME_SIZE_PX`)."""

    def __init__(self) -> None:
        self.fig = frame_figure()
        self.caption = self.fig.text(0.62, 0.97, "", va="top", fontsize=8, family="monospace")
        # seen from above (+z), with y forward to the right, x grows downwards
        top = _View(self.fig, _TOP_RECT, (1, 0), (spec.WALL_X, -spec.WALL_X), "above: x (m)")
        top.ax.tick_params(labelbottom=False)
        side = _View(self.fig, _SIDE_RECT, (1, 2), (spec.FLOOR_Z, spec.CEIL_Z), "side: z (m)")
        side.ax.set_xlabel("y (m), forward", fontsize=8)
        self.views = (top, side)
        self.depth = depth_panel(self.fig, _DEPTH_RECT, spec.FAR, spec.IMG)
        self.depth.axes.set_title("depth camera now", fontsize=8)
        self._scene: Scene | None = None

    def draw(self, scene: Scene, points: np.ndarray, decisions: np.ndarray, collided: bool,
             depth: np.ndarray, caption: str) -> np.ndarray:
        """The frame as an (H, W, 3) uint8 array: the flight through `points` (M, 3) in `scene`,
        with decisions (S, 3), and the current depth image (50, 50) in metres."""
        for view in self.views:
            if scene is not self._scene:
                view.set_scene(scene)
            view.set_flight(points, decisions.reshape(-1, 3), collided)
        self._scene = scene
        self.depth.set_data(depth)
        self.caption.set_text(caption)
        return figure_rgb(self.fig)
