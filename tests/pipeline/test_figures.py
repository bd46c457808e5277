"""The report's figures: one depth colour-map convention in both worlds' renderers, and figures
cropped to their content."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pacplan.io import plotting


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
    from pacplan.worlds.as_gym import depth_panel

    plt = plotting.pyplot()
    fig = plt.figure(figsize=(4, 3))
    try:
        image = depth_panel(fig, (0.1, 0.1, 0.5, 0.5), far=20.0, size=50)
        assert image.get_cmap().name == plotting.DEPTH_CMAP
        assert image.get_clim() == (0.0, 20.0)
        assert any(ax.get_ylabel() == plotting.DEPTH_LABEL for ax in fig.axes)
    finally:
        plt.close(fig)


def _certificates(m: int, ns: list[int], seed: int = 0) -> tuple[dict[int, Any], np.ndarray]:
    """Certificates for each N of one random cost matrix with m policies (and the matrix)."""
    from pacplan.pacbayes.certificate import build_certificate
    from pacplan.pacbayes.matrices import CostMatrix, sha256_array

    costs = (np.random.default_rng(seed).random((max(ns), m)) < 0.3).astype(np.float64)
    certs = {}
    for n in ns:
        values = costs[:n]
        certs[n] = build_certificate(CostMatrix(values, None, sha256_array(values), n, 0), 0.01)
    return certs, costs


@pytest.fixture
def unsaved(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Figures handed to `save_figure` by `pacplan.report.figures` and
    `pacplan.pipeline.prior.curve`, not drawn (the axes are what these tests read; drawing the PNGs
    would only cost seconds), closed afterwards."""
    from pacplan.pipeline.prior import curve
    from pacplan.report import figures

    captured: list[Any] = []

    def keep(fig: Any, path: str | Path, **kwargs: Any) -> Path:
        captured.append(fig)
        return Path(path)

    monkeypatch.setattr(figures, "save_figure", keep)
    monkeypatch.setattr(curve, "save_figure", keep)
    yield captured
    for fig in captured:
        plotting.pyplot().close(fig)


def _report_figures(tmp_path: Path, unsaved: list[Any], m: int, ns: list[int],
                    paper: dict[int, float] | None) -> list[Any]:
    from pacplan.report import figures

    certs, costs = _certificates(m, ns)
    figures.report_figures(tmp_path, certs, costs, paper=paper)
    return unsaved


def _whole(ticks: np.ndarray) -> bool:
    return bool(np.all(np.asarray(ticks) == np.round(ticks)))


@pytest.mark.parametrize("m", [7, 20, 50])
def test_policy_ticks_are_whole_numbers(tmp_path, unsaved, m):
    """The posterior's x-axis counts policies: no tick at 2.5 (m = 20 drew 2.5, 7.5, …)."""
    made = _report_figures(tmp_path, unsaved, m, [40], None)
    ax = made[1].axes[0]
    ticks = ax.get_xticks()
    assert _whole(ticks) and len(ticks) >= 3
    lo, hi = ax.get_xlim()
    assert lo <= 0 and hi >= m - 1  # every policy's bar is on the axis
    assert _whole(made[2].axes[0].get_yticks())  # the histogram counts policies too


def test_training_curve_iterations_are_whole_numbers(tmp_path, unsaved):
    from pacplan.pipeline.prior import curve

    records = [{"iteration": i, "cost": 0.5 - 0.1 * i, "best": 0.5 - 0.1 * i, "utility": i == 1,
                "sigma_mean": 1.0} for i in range(3)]
    curve.plot_training_curve(records, tmp_path / "curve.png")
    assert _whole(unsaved[0].axes[0].get_xticks())


def _axes_x(ax: Any, x: float) -> float:
    """Where data x falls across the axes, 0 (left edge) to 1 (right edge)."""
    lo, hi = ax.get_xlim()
    scale = np.log if ax.get_xscale() == "log" else float
    return float((scale(x) - scale(lo)) / (scale(hi) - scale(lo)))


@pytest.mark.parametrize("ns", [[250, 500, 1000], [1000, 2000, 4000], [40],
                                [1000, 10_000, 100_000]])
def test_bounds_axis_spans_the_runs_n_and_keeps_the_papers_points(tmp_path, unsaved, ns):
    """The run's N fill the axis (the paper's N = 4000 no longer squeezes N = 250 … 1000 into
    its left quarter); the paper's points inside the span are drawn, the others listed."""
    paper = {1000: 0.2602, 2000: 0.2299, 4000: 0.2155}
    fig = _report_figures(tmp_path, unsaved, 12, ns, paper)[0]
    ax = fig.axes[0]
    where = [_axes_x(ax, n) for n in ns]
    assert all(0.0 < x < 1.0 for x in where)
    if len(ns) > 1:
        assert where[0] < 0.15 and where[-1] > 0.85
    drawn = next((line for line in ax.get_lines() if line.get_label().startswith("paper")), None)
    inside = sorted(n for n in paper if ns[0] <= n <= ns[-1])
    outside = sorted(set(paper) - set(inside))
    assert (list(drawn.get_xdata()) if drawn is not None else []) == inside
    note = " ".join(t.get_text() for t in ax.texts)
    for n in outside:
        assert f"N = {n:,}: {100 * paper[n]:.2f} %" in note
    if not outside:
        assert "N = " not in note
