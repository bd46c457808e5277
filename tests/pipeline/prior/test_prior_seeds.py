"""A given prior: its recorded training seeds are checked against the certification and test
seeds (an overlap voids the bound) and are the ones the certificate states."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from safetensors.numpy import save_file

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import load_prior_seeds
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.provenance import verify_certificate as verify

BASE = {
    "name": "toy-prior-seeds",
    "world": {"name": "toy", "options": {"dim": 6, "shift": 0.3}},
    "seeds": {"prior": [0, 300], "cert": [10_000, 10_120], "test": [20_000, 20_100]},
    "es": {"iterations": 3, "envs_per_iter": 6, "pairs_per_env": 3, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 40},
    "policies": {"m": 8, "seed": 3},
    "certificate": {"n": [120], "delta": 0.05},
    "report": {"trajectories": 0},
}


def _cfg(seeds: dict | None = None):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["seeds"] |= seeds or {}
    return parse_config(data)


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A prior trained by ES on seeds [0, 300)."""
    out = tmp_path_factory.mktemp("trained")
    run(_cfg(), out, progress=False)
    return out / "prior.safetensors"


def test_an_es_prior_states_its_seeds(trained: Path) -> None:
    assert load_prior_seeds(trained) == (0, 300)
    manifest = json.loads((trained.parent / "manifest.json").read_text())
    assert manifest["prior.safetensors"]["inputs"]["seeds"] == [0, 300]


@pytest.mark.parametrize("role", ["cert", "test"])
def test_a_prior_trained_on_certification_or_test_seeds_is_refused(tmp_path: Path, trained: Path,
                                                                    role: str) -> None:
    """The config's own seeds are disjoint; the prior's recorded ones overlap: refused."""
    other = {"cert": [50_000, 50_120], "test": [60_000, 60_100], "prior": [70_000, 70_300]}
    other[role] = [250, 250 + (120 if role == "cert" else 100)]
    with pytest.raises(PacplanError, match=rf"prior_seeds.*\[0, 300\).*seeds\.{role}") as err:
        run(_cfg(other), tmp_path, prior_file=trained, progress=False)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "prior.safetensors").exists(), "refused before it was copied"


def test_the_certificate_states_the_prior_s_own_seeds(tmp_path: Path, trained: Path) -> None:
    """The config says [5000, 5300); the prior was trained on [0, 300): the certificate says
    what is true, also after a resume."""
    cfg = _cfg({"prior": [5000, 5300]})
    run(cfg, tmp_path, prior_file=trained, progress=False)
    assert verify(tmp_path / "certificate.json").provenance["seeds"]["prior"] == [0, 300]
    run(cfg, tmp_path, prior_file=trained, progress=False)
    assert verify(tmp_path / "certificate.json").provenance["seeds"]["prior"] == [0, 300]


def test_a_prior_without_recorded_seeds_keeps_the_config_s_with_a_warning(tmp_path: Path) -> None:
    """The shipped priors record no seeds: the config's seeds.prior stand, and it is said."""
    prior = tmp_path / "old.safetensors"
    save_file({"mu": np.zeros(6), "logvar": np.zeros(6)}, str(prior))
    said: list[str] = []
    run(_cfg(), tmp_path / "run", prior_file=prior, progress=False, log=said.append)
    c = verify(tmp_path / "run" / "certificate.json")
    assert c.provenance["seeds"]["prior"] == [0, 300]
    assert any("records no training seeds" in line and "seeds.prior" in line for line in said)


def test_a_prior_of_the_wrong_size_names_mu(tmp_path: Path) -> None:
    prior = tmp_path / "p.safetensors"
    save_file({"mu": np.zeros(7), "logvar": np.zeros(7)}, str(prior))
    with pytest.raises(PacplanError, match=r"p\.safetensors: mu has 7 weights but world 'toy' "
                       r"needs 6"):
        run(_cfg(), tmp_path / "run", prior_file=prior, progress=False)


def test_a_nan_prior_is_refused_naming_the_file(tmp_path: Path) -> None:
    """A NaN prior used to be accepted; the later error named no file."""
    prior = tmp_path / "nan.safetensors"
    save_file({"mu": np.array([0, 0, np.nan, 0, 0, 0.0]), "logvar": np.zeros(6)}, str(prior))
    with pytest.raises(PacplanError, match=r"nan\.safetensors.*mu"):
        run(_cfg(), tmp_path / "run", prior_file=prior, progress=False)
