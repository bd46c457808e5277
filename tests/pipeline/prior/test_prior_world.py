"""Where a prior was trained: its file says so, the certificate's provenance.prior_world
carries it (checked by verify), and a prior certified in another world is called a transfer
in the log and the report."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import read_prior_file, save_prior
from pacplan.io.files import atomic_write_json
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.prior.prior_world import transfer_note
from pacplan.pipeline.provenance import verify_certificate as verify
from pacplan.report.document import write_report

BASE = {
    "name": "toy-transfer",
    "world": {"name": "toy", "options": {"dim": 4, "shift": 0.3}},
    "seeds": {"prior": [0, 300], "cert": [10_000, 10_080], "test": [20_000, 20_040]},
    "es": {"iterations": 3, "envs_per_iter": 4, "pairs_per_env": 2, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 40},
    "policies": {"m": 4, "seed": 3},
    "certificate": {"n": [80], "delta": 0.05},
    "report": {"trajectories": 0},
}


def _cfg(**world_options: float) -> object:
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["world"]["options"].update(world_options)
    return parse_config(data)


def test_the_prior_file_says_where_it_was_trained(tmp_path: Path) -> None:
    path = tmp_path / "p.safetensors"
    world = {"name": "quadruped", "options": {"variant": "paper-code", "physics": "mujoco"}}
    save_prior(path, np.zeros(3), np.zeros(3), 1, world=world)
    assert read_prior_file(path).world == world
    save_prior(path, np.zeros(3), np.zeros(3), 1)
    assert read_prior_file(path).world is None
    from safetensors.numpy import save_file

    for bad in ("[1, 2]", "{\"name\": 3, \"options\": {}}", "not json"):
        save_file({"mu": np.zeros(3), "logvar": np.zeros(3)}, str(path), {"world": bad})
        with pytest.raises(PacplanError, match="metadata world") as err:
            read_prior_file(path)
        assert "\n" not in str(err.value)


def test_transfer_note_names_what_differs() -> None:
    mj = {"name": "quadruped", "options": {"variant": "paper-code", "physics": "mujoco"}}
    pb = {"name": "quadruped", "options": {"variant": "paper-code", "physics": "bullet"}}
    assert transfer_note(None, pb) is None
    assert transfer_note(mj, mj) is None
    assert transfer_note(mj, {**mj, "options": {**mj["options"], "threads": 4}}) is None
    note = transfer_note(mj, pb)
    assert note is not None and "physics: 'mujoco' there, 'bullet' here" in note
    text = {"name": "quadruped", "options": {"variant": "text", "physics": "mujoco"}}
    assert "variant: 'paper-code' there, 'text' here" in transfer_note(mj, text)
    assert "world 'uav' there, 'quadruped' here" in transfer_note(
        {"name": "uav", "options": {}}, mj)


def test_a_trained_prior_records_its_world_and_the_certificate_carries_it(
        tmp_path: Path) -> None:
    """Trained here: the prior file and the certificate name the run's own world (no
    transfer). Certified in another world: the log and the report say transfer, the
    certificate's prior_world is the training world, and verify checks that claim."""
    own = tmp_path / "own"
    run(_cfg(), own, progress=False)
    world = {"name": "toy", "options": {"dim": 4, "shift": 0.3}}
    assert read_prior_file(own / "prior.safetensors").world == world
    assert verify(own / "certificate.json").provenance["prior_world"] == world
    assert "a transfer experiment" not in write_report(own).read_text()

    said: list[str] = []
    other = tmp_path / "other"
    run(_cfg(shift=0.1), other, prior_file=own / "prior.safetensors", progress=False,
        log=said.append)
    assert any("transfer" in s and "shift: 0.3 there, 0.1 here" in s for s in said)
    cert = verify(other / "certificate.json")
    assert cert.provenance["prior_world"] == world
    assert cert.provenance["world"]["options"]["shift"] == 0.1
    assert "**a transfer experiment**" in write_report(other).read_text()

    # a certificate claiming another training world than its prior file's is refused
    path = other / "certificate.json"
    data = json.loads(path.read_text())
    data["provenance"]["prior_world"]["options"]["shift"] = 0.2
    del data["content_sha256"]  # no hash: only the run directory vouches for it
    atomic_write_json(path, data)
    with pytest.raises(PacplanError, match=r"provenance\.prior_world"):
        verify(path)


def test_the_papers_prior_file_says_it_was_trained_in_the_paper_code_world(
        tmp_path: Path) -> None:
    from pacplan.io.paperdata import paper_data_dir
    from pacplan.pipeline.prior.paper_priors import write_minitaur_prior

    if paper_data_dir() is None:
        pytest.skip("the paper's files are not here (`pacplan data paper`)")
    out = tmp_path / "paper.safetensors"
    write_minitaur_prior(out)
    prior = read_prior_file(out)
    assert prior.world == {"name": "quadruped",
                           "options": {"variant": "paper-code", "physics": "bullet"}}
    assert prior.mu.size == 944
    mujoco = {"name": "quadruped", "options": {"variant": "paper-code", "physics": "mujoco"}}
    assert transfer_note(prior.world, {**prior.world}) is None
    assert "physics: 'bullet' there, 'mujoco' here" in transfer_note(prior.world, mujoco)


# A prior names its policy family: the UAV's `policy` and `policy_width` come from the prior's
# file where the config leaves them unset (`adopt_prior_options`).

UAV = {
    "name": "uav-family",
    "world": {"name": "uav", "options": {"compile": False}},
    "seeds": {"prior": [0, 100], "cert": [100_000, 100_006], "test": [200_000, 200_004]},
    "executor": {"kind": "serial", "chunk_policies": 2, "chunk_seeds": 6},
    "policies": {"m": 2, "seed": 0},
    "certificate": {"n": [6], "delta": 0.05},
    "report": {"trajectories": 0},
}


def _uav_cfg(**options: object) -> object:
    data = yaml.safe_load(yaml.safe_dump(UAV))
    data["world"]["options"].update(options)
    return parse_config(data)


def _conv_prior(path: Path, width: int = 1) -> Path:
    from pacplan.worlds.uav.families import policy_family

    dim = policy_family("conv", width).dim
    world = {"name": "uav", "options": {"compile": True, "policy": "conv",
                                        "policy_width": width}}
    save_prior(path, np.zeros(dim), np.full(dim, -9.0), 1, seeds=[0, 100], world=world)
    return path


def test_a_prior_sets_the_policy_family_the_config_leaves_unset(tmp_path: Path) -> None:
    from pacplan.pipeline.prior.prior_world import adopt_prior_options

    prior = _conv_prior(tmp_path / "conv.safetensors")
    cfg = _uav_cfg()
    note = adopt_prior_options(cfg, prior)
    assert note is not None and "policy: conv, policy_width: 1" in note
    assert cfg.world.options == {"compile": False, "policy": "conv", "policy_width": 1}
    assert adopt_prior_options(cfg, prior) is None  # set once; the config's is kept after
    explicit = _uav_cfg(policy="paper")
    assert adopt_prior_options(explicit, prior) is None
    assert explicit.world.options == {"compile": False, "policy": "paper"}
    plain = tmp_path / "plain.safetensors"  # a file that records no world sets nothing
    save_prior(plain, np.zeros(3), np.zeros(3), 1)
    assert adopt_prior_options(_uav_cfg(), plain) is None
    assert adopt_prior_options(_cfg(), prior) is None  # the toy world has no family options


def test_a_run_certifies_the_conv_family_its_prior_was_trained_as(tmp_path: Path) -> None:
    """No policy option in the config: the run flies the prior's family, freezes it in its
    config and says so; a config that names the paper's net refuses the conv prior in one line
    naming the family and both sizes."""
    prior = _conv_prior(tmp_path / "conv.safetensors")
    said: list[str] = []
    out = tmp_path / "run"
    run(_uav_cfg(), out, prior_file=prior, progress=False, log=said.append)
    assert any("policy: conv, policy_width: 1" in s for s in said)
    frozen = yaml.safe_load((out / "config.yaml").read_text())
    assert frozen["world"]["options"]["policy"] == "conv"
    cert = verify(out / "certificate.json")
    assert cert.provenance["world"]["options"]["policy_width"] == 1
    assert np.load(out / "policies.npy").shape == (2, 34_380)
    run(_uav_cfg(), out, prior_file=prior, progress=False)  # resumes: the same config
    with pytest.raises(PacplanError, match=r"34380 weights but world 'uav' \(policy paper\) "
                                           r"needs 13943") as err:
        run(_uav_cfg(policy="paper"), tmp_path / "paper", prior_file=prior, progress=False)
    assert "\n" not in str(err.value)
