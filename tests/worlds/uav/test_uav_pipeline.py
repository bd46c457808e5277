"""The UAV presets and the shipped prior, end to end through the pipeline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pacplan.config import load_config
from pacplan.es.checkpoint import load_prior
from pacplan.pipeline.provenance import verify_certificate as verify
from pacplan.presets import preset_path, shipped_priors

REPO = Path(__file__).resolve().parents[3]


def test_shipped_priors_fit_the_uav_world():
    """The shipped UAV priors fit their policy family: `uav` (the taught convnet, issue 52) is
    what every UAV preset certifies; `uav-paper-net` (the same teacher, the paper's net) and
    `uav-es` (ES alone) are kept for the comparisons with the paper."""
    from pacplan.worlds.uav import spec
    from pacplan.worlds.uav.world import UAVWorld

    conv = UAVWorld(compile=False, policy="conv", policy_width=4).policy_dim()
    for name, dim in (("uav", conv), ("uav-paper-net", spec.POLICY_DIM),
                      ("uav-es", spec.POLICY_DIM)):
        mu, logvar = load_prior(shipped_priors()[name])
        assert mu.shape == logvar.shape == (dim,), name
        assert np.all(np.isfinite(mu)) and np.all(np.isfinite(logvar))
    for preset in ("uav-quick", "uav-paper", "uav-tight"):
        cfg = load_config(preset_path(preset))
        assert Path(cfg.prior) == shipped_priors()["uav"].resolve(), preset


@pytest.mark.parametrize("preset", ["uav-quick", "uav-paper"])
def test_presets_are_valid_and_disjoint(preset):
    cfg = load_config(preset_path(preset))
    assert cfg.world.name == "uav" and cfg.policies.m == 50
    assert any(b.world_options == {"use_net": False} for b in cfg.baselines)


@pytest.mark.slow
def test_uav_quick_pipeline_small(tmp_path: Path):
    """uav-quick with fewer environments: certificates verify, the baseline row is there."""
    from pacplan.pipeline.pipeline import run
    from pacplan.report.document import write_report

    cfg = load_config(preset_path("uav-quick"))
    cfg.policies.m = 6
    cfg.certificate.n = [64]
    cfg.seeds.test = (200000, 200064)
    cfg.report.trajectories = 1
    run(cfg, tmp_path, progress=False)
    c = verify(tmp_path / "certificate.json")
    assert c.n == 64 and c.m == 6 and c.test_n == 64
    assert c.certified >= c.emp_cost
    report = write_report(tmp_path).read_text()
    assert "baseline: depth-filter-only" in report
    assert len(list((tmp_path / "figures").glob("trajectory_seed*.png"))) == 1


def test_shipped_uav_result_verifies():
    """results/uav/certificate.json recomputes from its stored matrices, bound above test CI."""
    c = verify(REPO / "results" / "uav" / "certificate.json")
    assert c.n == 4000 and c.m == 50 and c.test_n == 5000
    assert c.certified >= c.test_ci[0]
