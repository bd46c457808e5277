"""`verify` inside a run directory: provenance is checked against manifest.json and the files.

The shipped results are certificates written before certificates carried their own content
hash; they must still verify, because their provenance is checked against their run's manifest.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN, fails_in_one_line, require_whole
from pacplan.config import parse_config
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.provenance import verify_certificate as verify
from verify_helpers import read, small_certificate, write

REPO = Path(__file__).resolve().parents[2]

CONFIG = {**SMALL_TOY_RUN, "name": "toy-verify"}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("run") / "toy"
    run(parse_config(json.loads(json.dumps(CONFIG))), folder, progress=False)
    return folder


@pytest.fixture
def rundir(finished_run: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(finished_run, tmp_path / "toy"))


def _fails(path: Path, *words: str) -> str:
    """verify fails with a one-line message containing every word; returns the message."""
    return fails_in_one_line(verify, path, *words)


SHIPPED = sorted((REPO / "results").glob("*/certificate.json")) + sorted(
    (REPO / "results").glob("*/certificates/N*.json"))
# the earlier robot's quadruped run, moved out of results/ (issue 20): its certificates were
# written before content_sha256 existed, so only its run directory's manifest vouches for them
LEGACY_RUN = REPO / "benchmarks" / "data" / "quadruped-minitaur-v1" / "results" / "quadruped"
LEGACY = [LEGACY_RUN / "certificate.json", *sorted(LEGACY_RUN.glob("certificates/N*.json"))]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_shipped_certificates_verify(path: Path):
    require_whole(path.parent.parent if path.parent.name == "certificates" else path.parent)
    assert "content_sha256" in read(path)
    assert 0.0 < verify(path).certified < 1.0


@pytest.mark.parametrize("path", LEGACY, ids=lambda p: str(p.relative_to(REPO)))
def test_legacy_certificates_verify_in_their_run(path: Path):
    assert "content_sha256" not in read(path)
    assert 0.0 < verify(path).certified < 1.0


def test_run_certificates_verify(rundir: Path):
    for path in [rundir / "certificate.json", *sorted(rundir.glob("certificates/*.json"))]:
        assert verify(path).provenance["policies_sha256"]


def test_run_certificate_without_content_hash_is_checked_by_the_manifest(rundir: Path):
    path = rundir / "certificates" / "N30.json"
    data = read(path)
    del data["content_sha256"]
    write(path, data)
    assert verify(path).n == 30
    data["provenance"]["seeds"]["prior"] = [0, 99]  # not in the manifest: held to config.yaml
    write(path, data)
    _fails(path, "provenance.seeds.prior", "config.yaml")


@pytest.mark.parametrize("key", ["prior_sha256", "policies_sha256"])
def test_provenance_hashes_are_checked_against_the_manifest(rundir: Path, key: str):
    path = rundir / "certificate.json"
    data = read(path)
    data["provenance"][key] = "0" * 64
    write(path, data, rehash=True)
    _fails(path, f"provenance.{key}", "manifest.json")


@pytest.mark.parametrize(("key", "value"), [
    ("cert", [10_000, 10_061]), ("cert", [10_001, 10_061]), ("test", [20_000, 20_049]),
])
def test_provenance_seeds_are_checked_against_the_manifest(rundir: Path, key: str, value: list):
    path = rundir / "certificate.json"
    data = read(path)
    data["provenance"]["seeds"][key] = value
    write(path, data, rehash=True)
    _fails(path, f"provenance.seeds.{key}")


def test_provenance_world_is_checked_against_the_manifest(rundir: Path):
    path = rundir / "certificates" / "N60.json"
    data = read(path)
    data["provenance"]["world"]["options"]["shift"] = 0.1
    write(path, data, rehash=True)
    _fails(path, "provenance.world")


def test_overlapping_seed_ranges_are_refused(rundir: Path):
    path = rundir / "certificate.json"
    data = read(path)
    data["provenance"]["seeds"]["prior"] = [0, 10_001]
    write(path, data, rehash=True)
    _fails(path, "provenance.seeds", "overlap")


def test_changed_policies_file_is_caught(rundir: Path):
    thetas = np.load(rundir / "policies.npy")
    thetas[0, 0] += 1.0
    np.save(rundir / "policies.npy", thetas)
    _fails(rundir / "certificate.json", "policies.npy")


def test_changed_prior_file_is_caught(rundir: Path):
    (rundir / "prior.safetensors").write_bytes(b"not the prior")
    _fails(rundir / "certificates" / "N30.json", "prior.safetensors")


def test_manifest_that_is_not_a_mapping_is_one_line(rundir: Path):
    (rundir / "manifest.json").write_text("[1, 2]")
    _fails(rundir / "certificate.json", "manifest.json")


def test_legacy_certificate_moved_out_of_its_run_is_refused(tmp_path: Path):
    folder = tmp_path / "moved"
    shutil.copytree(LEGACY_RUN / "costs", folder / "costs")
    shutil.copy(LEGACY_RUN / "certificate.json", folder / "certificate.json")
    _fails(folder / "certificate.json", "content_sha256")


def test_certify_matrix_certificate_in_a_folder_with_a_manifest(tmp_path: Path):
    """No provenance, no claims to check against the manifest: the content hash suffices."""
    path = small_certificate(tmp_path)
    (tmp_path / "manifest.json").write_text("{}")
    assert verify(path).provenance == {}
