"""A certify-policy certificate names what it certifies inside its hashed content, and
`pacplan verify` re-checks that against the folder's certify-policy.json and the policy files
(issue 51): an edited stamp, an edited record or a changed policy file fails in one line
naming the field."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest

from helpers import cli
from pacplan.pipeline.rundir import identity
from pacplan.policy_certification import certify_policy
from pacplan.policy_certification.inputs import spec_sha256
from pacplan.policy_certification.provenance import versions

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


@pytest.fixture(scope="module")
def certified(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder certifying an ONNX policy file and a callable on CartPole."""
    from test_user_code_boundary import _linear_onnx

    folder = tmp_path_factory.mktemp("prov")
    model = _linear_onnx(folder / "model.onnx", 4, 2)
    certify_policy("CartPole-v1", [str(model), "user_policies:lean"], n=6, test_n=4,
                   cost="terminated", horizon=40, out=folder / "cert")
    return folder / "cert"


def _copy(src: Path, dst: Path) -> Path:
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_the_certificate_names_what_it_certifies(certified: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cert = json.loads((certified / "certificate.json").read_text())
    record = cert["provenance"]["certify_policy"]
    stamp = json.loads((certified / "certify-policy.json").read_text())["inputs"]
    shared = {k: v for k, v in record.items()
              if k not in ("policy_files", "files", "policy_names", "versions")}
    shared["seeds"] = {k: shared["seeds"][k] for k in ("first", "train")}
    assert shared == stamp
    assert record["env"] == {"id": "CartPole-v1", "kwargs": {}, "gymnasium": gym.__version__,
                             "spec_sha256": spec_sha256(gym.spec("CartPole-v1"))}
    assert record["cost"]["cost"] == "terminated" and record["horizon"] == 40
    assert record["seeds"] == {"first": 1_000_000, "train": None,
                               "cert": [1_000_000, 1_000_006], "test": [1_000_006, 1_000_010]}
    assert [p["kind"] for p in record["policies"]] == ["onnx", "callable"]
    assert [f["label"] for f in record["policy_files"]] == [str(certified.parent / "model.onnx")]
    assert record["policy_names"][0] == str(certified.parent / "model.onnx")
    assert len(record["policy_names"]) == 2  # the callable is named too, not only its kind
    assert record["versions"] == versions() and "python" in record["versions"]
    code, out, err = cli(["verify", str(certified / "certificate.json")], capsys)
    assert code == 0, err
    assert "matches certify-policy.json" in " ".join(out.split())


def _sealed(cert: dict) -> str:
    """The content hash of an edited certificate (a forger who knows the format)."""
    from pacplan.pacbayes.schema import certificate_content_sha256

    return certificate_content_sha256({k: v for k, v in cert.items()
                                       if k != "content_sha256"})


def _stamp_edit(folder: Path, rehash: bool) -> None:
    path = folder / "certify-policy.json"
    stamp = json.loads(path.read_text())
    stamp["inputs"]["env"]["id"] = "LunarLander-v3"
    if rehash:
        stamp["identity"] = identity(stamp["inputs"])
    path.write_text(json.dumps(stamp))


@pytest.mark.parametrize(("edit", "words"), [
    (lambda f: _stamp_edit(f, rehash=False), "certify-policy.json was edited: its identity is "
                                             "not the sha256 of its inputs"),
    (lambda f: _stamp_edit(f, rehash=True), "provenance.certify_policy.env is "),
    (lambda f: (f.parent / "model.onnx").write_bytes(b"not the model"),
     "model.onnx has changed since it was certified"),
])
def test_verify_fails_in_one_line_naming_what_changed(certified: Path, tmp_path: Path, edit,
                                                      words: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    # a copy of the folder and its surroundings: paths are relative, so the copy's own file
    folder = _copy(certified.parent, tmp_path / "copy") / "cert"
    assert cli(["verify", str(folder / "certificate.json")], capsys)[0] == 0
    edit(folder)
    code, _, err = cli(["verify", str(folder / "certificate.json")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert words in err, err


def test_an_edited_record_breaks_the_content_hash(certified: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy(certified.parent, tmp_path / "copy") / "cert"
    cert = json.loads((folder / "certificate.json").read_text())
    cert["provenance"]["certify_policy"]["versions"]["gymnasium"] = "0.0.1"
    (folder / "certificate.json").write_text(json.dumps(cert))
    code, _, err = cli(["verify", str(folder / "certificate.json")], capsys)
    assert code == 2 and "content_sha256" in err, err


def test_a_certificate_without_the_record_is_refused_in_its_folder(
        certified: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = _copy(certified.parent, tmp_path / "copy") / "cert"
    cert = json.loads((folder / "certificate.json").read_text())
    cert["provenance"] = {}
    cert["content_sha256"] = _sealed(cert)
    (folder / "certificate.json").write_text(json.dumps(cert))
    code, _, err = cli(["verify", str(folder / "certificate.json")], capsys)
    assert code == 2 and "does not say what was certified" in err, err
