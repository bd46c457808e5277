"""The report's figures: one depth colour-map convention in both worlds' renderers, and figures
cropped to their content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pacplan import plotting


def _captured(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[Any]:
    """Figures handed to `save_figure` by `module` (still written, so the renderer completes)."""
    figures: list[Any] = []
    real = plotting.save_figure

    def capture(fig: Any, path: str | Path, **kwargs: Any) -> Path:
        figures.append(fig)
        return real(fig, path, **kwargs)

    monkeypatch.setattr(module, "save_figure", capture)
    return figures


def _depth_images(fig: Any) -> list[Any]:
    return [im for ax in fig.axes for im in ax.get_images()]


def _check_convention(fig: Any, far: float) -> None:
    images = _depth_images(fig)
    assert images
    for im in images:
        assert im.get_cmap().name == plotting.DEPTH_CMAP == "viridis_r"
        assert im.get_clim() == (0.0, far)
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert plotting.DEPTH_LABEL in labels and plotting.DEPTH_LABEL == "depth (m)"


def _content_fraction(png: Path) -> tuple[float, float]:
    """Width and height fractions of the image covered by non-white pixels."""
    from matplotlib.image import imread

    img = imread(str(png))[..., :3]
    ink = (img < 0.98).any(axis=2)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    return (cols[-1] - cols[0] + 1) / ink.shape[1], (rows[-1] - rows[0] + 1) / ink.shape[0]


def test_uav_figure_follows_the_depth_convention_and_is_cropped(tmp_path, monkeypatch):
    from pacplan.worlds.uav import render, spec

    figures = _captured(monkeypatch, render)
    out = render.render_figure(seed=200_001, out=tmp_path / "uav.png")
    _check_convention(figures[0], spec.FAR)
    width, height = _content_fraction(Path(out))
    assert width > 0.95 and height > 0.95


def test_quadruped_figure_follows_the_depth_convention_and_is_cropped(tmp_path, monkeypatch):
    pytest.importorskip("pybullet")
    from pacplan.worlds.quadruped import render
    from pacplan.worlds.quadruped.camera import CameraConfig

    figures = _captured(monkeypatch, render)
    out = render.render_figure(seed=3, out=str(tmp_path / "quadruped.png"))
    _check_convention(figures[0], CameraConfig().far_m)
    width, height = _content_fraction(Path(out))
    assert width > 0.95 and height > 0.95


def test_gymnasium_frames_share_the_convention():
    """The Gymnasium frames' depth panel: the same colour map, 0 to far, labelled colorbar."""
    from pacplan.worlds.gym_common import depth_panel

    plt = plotting.pyplot()
    fig = plt.figure(figsize=(4, 3))
    try:
        image = depth_panel(fig, (0.1, 0.1, 0.5, 0.5), far=20.0, size=50)
        assert image.get_cmap().name == plotting.DEPTH_CMAP
        assert image.get_clim() == (0.0, 20.0)
        assert any(ax.get_ylabel() == plotting.DEPTH_LABEL for ax in fig.axes)
    finally:
        plt.close(fig)
