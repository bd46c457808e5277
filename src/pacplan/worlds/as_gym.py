"""What both Gymnasium environments share: the image-observation option and the frame canvas.

`image_obs="float"` (the default) observes depth as the worlds' policies see it, (50, 50) float32
metres, so a Gym episode replays a certified rollout bit for bit. `image_obs="uint8"` observes
(1, 50, 50) uint8, depth scaled from 0 (0 m) to 255 (the camera's far distance), channel-first:
the image layout Stable-Baselines3's `CnnPolicy` and `MultiInputPolicy` take without a wrapper.

Frames for `render_mode="rgb_array"` are drawn with matplotlib's Agg canvas on a figure of fixed
size that the env keeps (no pyplot, no global state, no display), and depth is drawn in the
project's one convention (`pacplan.io.plotting.draw_depth`: "viridis_r" from 0 m, near and bright,
to the camera's far distance, dark, with a "depth (m)" colorbar).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError
from pacplan.validation import check_choice

IMAGE_OBS = ("float", "uint8")
RENDER_MODES = ["rgb_array"]  # "human" would need a display and a GUI event loop: not offered
FRAME_SIZE_PX = (640, 360)  # (width, height): even sides, as video encoders require
FRAME_DPI = 100


def check_image_obs(image_obs: str) -> str:
    """`image_obs` is "float" (metres, the certified layout) or "uint8" (SB3's image layout)."""
    return check_choice("image_obs", image_obs, IMAGE_OBS)


def check_render_mode(render_mode: str | None) -> str | None:
    """None or one of `RENDER_MODES`."""
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise PacplanError(
            f"unknown render_mode {render_mode!r}; choose one of {', '.join(RENDER_MODES)} "
            "(or None)"
        )
    return render_mode


def depth_space(image_obs: str, far: float, size: int) -> spaces.Box:
    """The depth image's observation space in layout `image_obs`."""
    if image_obs == "uint8":
        return spaces.Box(0, 255, (1, size, size), dtype=np.uint8)
    return spaces.Box(0.0, far, (size, size), dtype=np.float32)


def depth_observation(depth: np.ndarray, image_obs: str, far: float) -> np.ndarray:
    """Depth in metres (size, size) as the env observes it in layout `image_obs`."""
    if image_obs == "uint8":
        scaled = np.rint(np.clip(depth, 0.0, far) * (255.0 / far))
        return scaled.astype(np.uint8)[None]
    return depth


def frame_figure() -> Any:
    """A fixed-size figure on its own Agg canvas (`FRAME_SIZE_PX`); no pyplot, no display."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    width, height = FRAME_SIZE_PX
    fig = Figure(figsize=(width / FRAME_DPI, height / FRAME_DPI), dpi=FRAME_DPI)
    FigureCanvasAgg(fig)
    return fig


def figure_rgb(fig: Any) -> np.ndarray:
    """Draw `fig` and return its pixels as an (H, W, 3) uint8 array (a copy)."""
    fig.canvas.draw()
    return np.array(fig.canvas.buffer_rgba())[..., :3]


def depth_panel(fig: Any, rect: tuple[float, float, float, float], far: float, size: int) -> Any:
    """An image axes at `rect` (figure fraction) showing depth in the one convention
    (`plotting.draw_depth`) with its "depth (m)" colorbar beside it; returns the image artist,
    to update with `set_data`."""
    from pacplan.io.plotting import depth_colorbar, draw_depth

    ax = fig.add_axes(rect)
    image = draw_depth(ax, np.full((size, size), far, dtype=np.float32), far)
    left, bottom, width, height = rect
    cax = fig.add_axes((left + width + 0.01, bottom, 0.015, height))
    depth_colorbar(fig, image, None, cax=cax)
    cax.tick_params(labelsize=7)
    cax.yaxis.label.set_size(8)
    return image
