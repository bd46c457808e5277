"""The frame `MinitaurTerrainEnv.render()` returns: the terrain from the side and from above with
the torso's path walked so far, and the depth image the torso camera sees now.

Cheap enough for a video of every step: the figure and its artists are built once per env, the
terrain profile once per terrain, and a frame only moves lines and swaps the image.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pacplan.worlds.as_gym import FRAME_SIZE_PX, depth_panel, figure_rgb, frame_figure
from pacplan.worlds.quadruped.terrain import Terrain

_X_SPAN = (-0.5, 10.5)  # the flat start, the ridges, and a little past them
_SIDE_RECT = (0.08, 0.47, 0.5, 0.45)
_TOP_RECT = (0.08, 0.11, 0.5, 0.27)
_WIDTH_PX, _HEIGHT_PX = FRAME_SIZE_PX
_DEPTH_RECT = (0.62, 0.08, 0.26, 0.26 * _WIDTH_PX / _HEIGHT_PX)


class MinitaurFrame:
    """Draws the env's frames on one fixed-size figure (`as_gym.FRAME_SIZE_PX`)."""

    def __init__(self, far_m: float, image_size: int) -> None:
        self.fig = fig = frame_figure()
        self.caption = fig.text(0.62, 0.97, "", va="top", fontsize=8, family="monospace")
        self.side = fig.add_axes(_SIDE_RECT)
        self.top = fig.add_axes(_TOP_RECT, sharex=self.side)
        self.side.set_xlim(*_X_SPAN)
        self.side.set_ylabel("side: z (m)", fontsize=8)
        self.top.set_ylabel("above: y (m)", fontsize=8)
        self.top.set_xlabel("x (m), forward", fontsize=8)
        self.side.tick_params(labelsize=7, labelbottom=False)
        self.top.tick_params(labelsize=7)
        self.top.axhline(0.0, color="0.6", lw=0.5)
        self._terrain_artists: list[Any] = []
        (self.side_path,) = self.side.plot([], [], color="tab:blue", lw=1.5)
        (self.top_path,) = self.top.plot([], [], color="tab:blue", lw=1.5)
        (self.side_now,) = self.side.plot([], [], "o", color="tab:blue", ms=5)
        (self.top_now,) = self.top.plot([], [], "o", color="tab:blue", ms=5)
        self.finish = self.side.axvline(0.0, color="tab:green", ls="--", lw=1)
        self.finish_label = self.side.text(0.0, 0.97, " finish", color="tab:green", fontsize=7,
                                           va="top", transform=self.side.get_xaxis_transform())
        self.depth = depth_panel(fig, _DEPTH_RECT, far_m, image_size)
        self.depth.axes.set_title("torso depth camera now", fontsize=8)
        self._terrain: Terrain | None = None

    def set_terrain(self, terrain: Terrain) -> None:
        """Draw the terrain's profile and ridge crests (replacing the previous terrain's)."""
        for artist in self._terrain_artists:
            artist.remove()
        xs = np.linspace(*_X_SPAN, 1101)
        hs = terrain.height(xs)
        self._terrain_artists = [
            self.side.fill_between(xs, hs, -0.1, color="0.75", lw=0),
            *self.side.plot(xs, hs, color="0.3", lw=0.8),
            *(self.top.axvline(c, color="0.85", lw=0.8, zorder=0)
              for c in terrain.ridge_starts + terrain.plank_length),
        ]
        self.side.set_ylim(-0.1, max(0.6, float(hs.max()) + 0.35))
        self._terrain = terrain

    def draw(self, terrain: Terrain, path: np.ndarray, finish_x: float, depth: np.ndarray,
             caption: str, fell: bool) -> np.ndarray:
        """The frame as an (H, W, 3) uint8 array: the torso path (M, 3) of (x, y, z) walked on
        `terrain`, the finish line at `finish_x`, and the current depth image in metres."""
        if terrain is not self._terrain:
            self.set_terrain(terrain)
        colour = "tab:red" if fell else "tab:blue"
        self.side_path.set_data(path[:, 0], path[:, 2])
        self.top_path.set_data(path[:, 0], path[:, 1])
        for now, (h, v) in ((self.side_now, (0, 2)), (self.top_now, (0, 1))):
            now.set_data([path[-1, h]], [path[-1, v]])
            now.set_color(colour)
        self.finish.set_xdata([finish_x, finish_x])
        self.finish_label.set_x(finish_x)
        reach = max(1.0, float(np.abs(path[:, 1]).max()) + 0.2)  # keep a veering path in view
        self.top.set_ylim(-reach, reach)
        self.depth.set_data(depth)
        self.caption.set_text(caption)
        return figure_rgb(self.fig)
