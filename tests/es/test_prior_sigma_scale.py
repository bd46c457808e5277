"""es.prior_sigma_scale: the prior file is ES's N(μ, σ²) with σ scaled, and ES never sees it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import read_prior
from pacplan.pipeline.prior.training import es_fingerprint, train_prior
from pacplan.report.prior import _narrowed

_SEEDS = {"prior": [0, 500], "cert": [1000, 2000], "test": [3000, 4000]}


def _cfg(**es: object):
    base = {"iterations": 3, "envs_per_iter": 4, "pairs_per_env": 2, "lr_mu": 0.1,
            "lr_logvar": 0.1, "seed": 3}
    return parse_config({"name": "t", "world": {"name": "toy", "options": {"dim": 5}},
                         "seeds": _SEEDS, "es": base | es})


def _train(run: Path, scale: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], bytes]:
    """(ES state arrays, prior arrays, prior bytes) after train-prior with this scale."""
    train_prior(_cfg(prior_sigma_scale=scale), run, progress=False)
    return (load_file(run / "es_state.safetensors"), load_file(run / "prior.safetensors"),
            (run / "prior.safetensors").read_bytes())


def test_a_finished_run_rewrites_its_prior_narrower_and_back(tmp_path: Path) -> None:
    run = tmp_path / "run"
    state, plain, plain_bytes = _train(run, 1.0)
    state_q, quarter, _ = _train(run, 0.25)  # resumes: no iteration runs again
    for name in ("mu", "logvar", "m_mu", "v_mu"):
        assert np.array_equal(state[name], state_q[name]), name
    assert np.array_equal(quarter["mu"], plain["mu"])
    ratio = np.exp(quarter["logvar"] / 2) / np.exp(plain["logvar"] / 2)
    np.testing.assert_allclose(ratio, 0.25, rtol=1e-12)
    with safe_open(str(run / "prior.safetensors"), framework="numpy") as fh:
        assert fh.metadata()["sigma_scale"] == "0.25"
    read_prior((run / "prior.safetensors").read_bytes(), "prior")  # still a valid prior
    _, _, back = _train(run, 1.0)
    assert back == plain_bytes  # the scale leaves no trace once set back to 1


def test_the_scale_shapes_no_iterate_so_the_fingerprint_ignores_it() -> None:
    assert es_fingerprint(_cfg(prior_sigma_scale=0.5)) == es_fingerprint(_cfg())


def test_a_fresh_run_with_a_scale_trains_the_same_iterates(tmp_path: Path) -> None:
    state, plain, _ = _train(tmp_path / "a", 1.0)
    state_h, half, _ = _train(tmp_path / "b", 0.5)
    assert np.array_equal(state["mu"], state_h["mu"])
    np.testing.assert_allclose(half["logvar"] - plain["logvar"], 2 * math.log(0.5), atol=1e-12)


@pytest.mark.parametrize("bad", [0, -0.5, 1.5, float("nan")])
def test_a_scale_outside_zero_to_one_is_refused_naming_the_field(bad: float) -> None:
    with pytest.raises(PacplanError, match="prior_sigma_scale"):
        _cfg(prior_sigma_scale=bad)


def test_the_report_says_the_file_is_narrower_and_flags_bad_metadata() -> None:
    assert _narrowed({}) == []
    assert "times 0.5" in _narrowed({"sigma_scale": "0.5"})[0]
    for bad in ("x", "2", "0", "nan"):
        assert "unreadable" in _narrowed({"sigma_scale": bad})[0]
