"""`pacplan render uav`: writes a PNG; policy files are read safely."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.render import load_theta, render_figure


def test_render_writes_png(tmp_path: Path) -> None:
    theta = np.random.default_rng(0).normal(0, 0.1, spec.POLICY_DIM).astype(np.float32)
    np.save(tmp_path / "theta.npy", theta)
    for path in (None, str(tmp_path / "theta.npy")):
        out = render_figure(seed=14, out=tmp_path / "fig.png", theta_path=path)
        data = Path(out).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_load_theta_formats_and_errors(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    theta = np.arange(spec.POLICY_DIM, dtype=np.float32)
    save_file({"mu": theta, "log_var": theta}, str(tmp_path / "prior.safetensors"))
    np.testing.assert_array_equal(load_theta(tmp_path / "prior.safetensors"), theta)
    np.save(tmp_path / "many.npy", np.stack([theta, theta + 1]))
    np.testing.assert_array_equal(load_theta(tmp_path / "many.npy"), theta)
    np.save(tmp_path / "short.npy", theta[:10])
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    for bad in ("short.npy", "obj.npy", "missing.npy"):
        with pytest.raises(PacplanError):
            load_theta(tmp_path / bad)
