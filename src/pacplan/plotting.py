"""The two matplotlib chores every figure shares: a headless backend and an atomic PNG write.

Used by the worlds' renderers and by the run's figures, so no figure can be left half-written
by a killed process and none needs a display.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from pacplan.files import atomic_write_bytes


def pyplot() -> Any:
    """matplotlib.pyplot on the non-interactive Agg backend (imported on first use: slow)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """Lay out, write as PNG atomically, close; returns the path."""
    plt = pyplot()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return Path(path)
