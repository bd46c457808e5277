"""The matplotlib chores every figure shares: a headless backend, an atomic PNG write, and the
one depth colour-map convention.

Used by the worlds' renderers and by the run's figures, so no figure can be left half-written
by a killed process and none needs a display. Depth images of every world are drawn the same
way (`draw_depth`): `viridis_r` from 0 m (near, bright) to the camera's far distance (dark),
with a colorbar labelled "depth (m)".
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.io.files import atomic_write_bytes

DEPTH_CMAP = "viridis_r"
"""Colour map of every depth image: near is bright, far is dark."""
DEPTH_LABEL = "depth (m)"
"""Label of every depth colorbar."""


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (imported on first use: slow)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def integer_ticks(axis: Any) -> None:
    """Ticks at whole numbers only, on an axis that counts (policy 2.5 does not exist)."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def draw_depth(ax: Any, depth: np.ndarray, far: float) -> Any:
    """Show a depth image (metres) on `ax` in the convention: `DEPTH_CMAP` over [0, far], no
    ticks. Returns the image, for `depth_colorbar`."""
    im = ax.imshow(np.asarray(depth), cmap=DEPTH_CMAP, vmin=0.0, vmax=float(far))
    ax.set_xticks([])
    ax.set_yticks([])
    return im


def depth_colorbar(fig: Any, image: Any, ax: Any, **kwargs: Any) -> Any:
    """The colorbar of depth image(s) drawn by `draw_depth`, labelled `DEPTH_LABEL`."""
    return fig.colorbar(image, ax=ax, label=DEPTH_LABEL, **kwargs)


def save_figure(fig: Any, path: str | Path, dpi: int = 110, crop: bool = False) -> Path:
    """Lay out (unless the figure has its own layout engine), write as PNG atomically, close;
    returns the path. `crop` trims the empty margin around the drawn content."""
    plt = pyplot()
    if fig.get_layout_engine() is None:
        fig.tight_layout()
    buf = io.BytesIO()
    extra = {"bbox_inches": "tight", "pad_inches": 0.06} if crop else {}
    fig.savefig(buf, format="png", dpi=dpi, **extra)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)
