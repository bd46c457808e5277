"""`pacplan export` and `pacplan verify PLANNER`: a certified planner leaves its run directory
intact, and any edit to its weights, probabilities or primitive library is named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import cli as run
from helpers import rehash_planner as _rehash
from pacplan.errors import PacplanError
from pacplan.export import export_planner, verify_planner
from pacplan.io.files import sha256_file

RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.fixture(scope="module")
def uav_planner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_planner(RESULTS / "uav", tmp_path_factory.mktemp("p") / "uav")


def _copy(planner: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(planner, tmp_path / "planner"))


def _edit_spec(planner: Path, edit) -> None:
    spec = json.loads((planner / "planner.json").read_text())
    edit(spec)
    (planner / "planner.json").write_text(json.dumps(spec))


def test_export_writes_a_planner_that_verifies(uav_planner: Path, capsys) -> None:
    code, out, _ = run(["verify", str(uav_planner)], capsys)
    assert code == 0 and "OK planner" in out
    spec = json.loads((uav_planner / "planner.json").read_text())
    cert = json.loads((RESULTS / "uav" / "certificate.json").read_text())
    support = spec["posterior"]["policy_index"]
    assert support == [i for i, p in enumerate(cert["p"]) if p > 0]
    assert spec["posterior"]["probability"] == [cert["p"][i] for i in support]
    assert spec["fixed"]["net_scale"] == 5.0 and len(spec["fixed"]["filter_cells"]) == 25
    # the evidence is byte-for-byte the run's
    for rel in ("certificate.json", "policies.npy", "costs/cert.npy", "costs/test.npy"):
        assert sha256_file(uav_planner / "run" / rel) == sha256_file(RESULTS / "uav" / rel)


def test_export_is_byte_reproducible(uav_planner: Path, tmp_path: Path) -> None:
    again = export_planner(RESULTS / "uav", tmp_path / "again")
    assert (again / "manifest.json").read_bytes() == (uav_planner / "manifest.json").read_bytes()


def test_export_a_chosen_n_and_the_quadruped(tmp_path: Path) -> None:
    out = export_planner(RESULTS / "uav", tmp_path / "n1000", n=1000)
    assert verify_planner(out).n == 1000
    assert json.loads((out / "planner.json").read_text())["certificate"] == \
        "run/certificates/N1000.json"
    q = export_planner(RESULTS / "quadruped", tmp_path / "q")
    assert verify_planner(q).m == 50
    with pytest.raises(PacplanError, match=r"no certificate for N = 7 .*1000, 2000, 4000"):
        export_planner(RESULTS / "uav", tmp_path / "x", n=7)
    with pytest.raises(PacplanError, match="not an empty folder"):
        export_planner(RESULTS / "uav", out)


def test_export_refuses_a_run_whose_certificate_does_not_verify(tmp_path: Path, capsys) -> None:
    run_dir = Path(shutil.copytree(RESULTS / "quadruped", tmp_path / "run",
                                   ignore=shutil.ignore_patterns("figures", "report*")))
    cert = json.loads((run_dir / "certificate.json").read_text())
    cert["p"][0], cert["p"][1] = cert["p"][1], cert["p"][0]
    (run_dir / "certificate.json").write_text(json.dumps(cert))
    code, _, err = run(["export", str(run_dir), "--out", str(tmp_path / "p")], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "refusing to export" in err and "does not verify" in err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("rehash", [False, True])
def test_tampered_weights_fail_verify(uav_planner: Path, tmp_path: Path, capsys,
                                      rehash: bool) -> None:
    planner = _copy(uav_planner, tmp_path)
    data = bytearray((planner / "weights.safetensors").read_bytes())
    data[-5] ^= 0x01  # one bit of one weight of the last policy
    (planner / "weights.safetensors").write_bytes(bytes(data))
    if rehash:
        _rehash(planner)
    code, _, err = run(["verify", str(planner)], capsys)
    assert code == 2 and err.count("\n") == 1 and "weights.safetensors" in err, err
    assert ("certified policies" in err) if rehash else ("sha256" in err)


@pytest.mark.parametrize("rehash", [False, True])
def test_tampered_probabilities_fail_verify(uav_planner: Path, tmp_path: Path, capsys,
                                            rehash: bool) -> None:
    planner = _copy(uav_planner, tmp_path)

    def favour_last(spec: dict) -> None:
        probs = spec["posterior"]["probability"]
        probs[0], probs[-1] = probs[-1], probs[0]

    _edit_spec(planner, favour_last)
    if rehash:
        _rehash(planner)
    code, _, err = run(["verify", str(planner)], capsys)
    assert code == 2 and err.count("\n") == 1 and "planner.json" in err, err
    assert ("posterior.probability" in err) if rehash else ("sha256" in err)


def test_tampered_primitive_library_fails_verify(uav_planner: Path, tmp_path: Path,
                                                 capsys) -> None:
    planner = _copy(uav_planner, tmp_path)

    def widen(spec: dict) -> None:
        spec["fixed"]["primitives"]["offsets_m"][0][0] = -1.5

    _edit_spec(planner, widen)
    _rehash(planner)
    code, _, err = run(["verify", str(planner)], capsys)
    assert code == 2 and "planner.json" in err and "fixed.primitives" in err, err


def test_tampered_evidence_and_extra_files_fail_verify(uav_planner: Path, tmp_path: Path,
                                                       capsys) -> None:
    planner = _copy(uav_planner, tmp_path)
    policies = np.load(planner / "run" / "policies.npy")
    policies[2, 0] += 1.0
    np.save(planner / "run" / "policies.npy", policies)
    _rehash(planner)
    code, _, err = run(["verify", str(planner)], capsys)
    assert code == 2 and "policies" in err, err
    planner = _copy(uav_planner, tmp_path / "b")
    (planner / "extra.onnx").write_bytes(b"x")
    code, _, err = run(["verify", str(planner)], capsys)
    assert code == 2 and "extra.onnx" in err and "not listed" in err, err
