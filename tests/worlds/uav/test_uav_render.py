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


REPO = Path(__file__).resolve().parents[3]


def test_render_accepts_a_float32_near_tie(tmp_path: Path) -> None:
    """Policy 5 of results/uav-paper-net (the paper's net) on seed 200,012: flown in float32,
    its first decision is a near-tie that the float64 check ranks the other way by 9e-8 m;
    `pacplan report` drew this figure and died on an assert. It is the flown primitive, within
    rounding, so the figure is drawn."""
    from pacplan.worlds.uav.batched import BatchedScene
    from pacplan.worlds.uav.policy_np import NumpyPolicy
    from pacplan.worlds.uav.world import UAVWorld

    theta = np.load(REPO / "results" / "uav-paper-net" / "policies.npy")[5]
    tr = UAVWorld(compile=False).trajectory(theta, 200_012)
    camera = BatchedScene()
    camera.load(tr.scene)
    img = camera.render(tr.decisions[:1])[0]
    npol = NumpyPolicy(theta)
    assert npol.choose(img) != int(tr.prims[0])  # the near-tie this test is about
    assert npol.scores(img).max() - npol.scores(img)[int(tr.prims[0])] < 1e-6
    np.save(tmp_path / "theta.npy", theta)
    out = render_figure(seed=200_012, out=tmp_path / "fig.png", theta_path=str(tmp_path /
                                                                                "theta.npy"))
    assert Path(out).read_bytes()[:4] == b"\x89PNG"


def test_render_refuses_a_flight_the_check_disagrees_with(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A flown primitive scored a metre below the best by the independent check is a defect
    named in one line, not a figure that shows another decision."""
    from pacplan.worlds.uav.policy_np import NumpyPolicy

    def lopsided(self: NumpyPolicy, image: np.ndarray) -> np.ndarray:
        s = np.zeros(spec.N_PRIMS)
        s[0] = s[24] = 1.0  # two corners: one of them was not flown
        return s

    monkeypatch.setattr(NumpyPolicy, "scores", lopsided)
    with pytest.raises(PacplanError, match=r"seed 14, decision 1: primitive .* the two policy "
                                           r"paths disagree") as e:
        render_figure(seed=14, out=tmp_path / "fig.png")
    assert "\n" not in str(e.value)
