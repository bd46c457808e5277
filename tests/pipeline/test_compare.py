"""The reproducibility contract (docs/reproducibility.md) and `pacplan compare`, which checks it.

The oracle for "another CPU" is the same machine with its numeric kernels forced elsewhere:
OpenBLAS's by `OPENBLAS_CORETYPE`, NumPy's SIMD dispatch by `NPY_DISABLE_CPU_FEATURES`,
PyTorch's by `ATEN_CPU_CAPABILITY`. A probe first shows that the forced kernels really round
differently (a BLAS matrix–vector product changes its last bits), so the test is not vacuous.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import cli
from pacplan.config import load_config
from pacplan.io.yamlio import read_yaml, yaml_text
from pacplan.pipeline.compare import TOLERANCE, Agreement, Difference, compare_runs
from pacplan.pipeline.pipeline import run
from pacplan.presets import preset_path

OTHER_CPU = {  # an old Intel's BLAS kernels, NumPy without AVX2/AVX-512 paths, PyTorch scalar
    "OPENBLAS_CORETYPE": "Sandybridge",
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",
    "ATEN_CPU_CAPABILITY": "default",
}
KERNEL_VARIABLES = tuple(OTHER_CPU)

PROBE = """
import hashlib, numpy as np
rng = np.random.default_rng(0)
a, p = rng.random((4000, 50)), rng.random(50)
print(hashlib.sha256((a @ p).tobytes()).hexdigest())
"""
LIBM_PROBE = """
import hashlib, numpy as np
x = np.random.default_rng(0).uniform(1e-6, 30.0, 100_000)
print(hashlib.sha256(b"".join(f(x).tobytes() for f in (np.exp, np.log, np.log1p))).hexdigest())
"""


def small_toy(tmp_path: Path, **executor: object) -> Path:
    """The toy preset cut down to seconds: 40 ES iterations, 12 policies, N = 500 and 1000."""
    data = read_yaml(preset_path("toy"))
    data["es"]["iterations"] = 40
    data["policies"]["m"] = 12
    data["seeds"]["cert"] = [100_000, 101_000]
    data["seeds"]["test"] = [200_000, 201_000]
    data["certificate"]["n"] = [500, 1000]
    data["executor"].update(executor)
    path = tmp_path / f"toy-{len(list(tmp_path.glob('toy-*.yaml')))}.yaml"
    path.write_text(yaml_text(data))
    return path


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES}
    return {**env, **extra}


def _run_in_subprocess(config: Path, out: Path, env: dict[str, str]) -> None:
    code = ("import sys; from pacplan.config import load_config; "
            "from pacplan.pipeline.pipeline import run; "
            "run(load_config(sys.argv[1]), sys.argv[2], progress=False)")
    subprocess.run([sys.executable, "-c", code, str(config), str(out)], env=env, check=True,
                   cwd=Path(__file__).resolve().parents[2], timeout=600)


def _probe(env: dict[str, str], code: str = PROBE) -> str:
    return subprocess.run([sys.executable, "-c", code], env=env, check=True, text=True,
                          capture_output=True, timeout=120).stdout.strip()


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="OPENBLAS_CORETYPE names x86-64 kernels")
@pytest.mark.kernel_free  # it sets both runs' kernels itself
def test_the_contract_holds_under_another_cpus_kernels(tmp_path: Path) -> None:
    here, other = _clean_env(), _clean_env(**OTHER_CPU)
    if _probe(here) == _probe(other):
        pytest.skip("OpenBLAS rounds a gemv identically under both kernels on this CPU: "
                    "this machine cannot stand in for another CPU")
    config = small_toy(tmp_path)
    _run_in_subprocess(config, tmp_path / "here", here)
    _run_in_subprocess(config, tmp_path / "other", other)
    result = compare_runs(tmp_path / "here", tmp_path / "other")
    # the contract: prior, policies and matrices byte for byte, certificates to 1e-9 relative
    assert isinstance(result, Agreement), str(result)
    assert set(result.identical) == {"prior.safetensors", "es_state.safetensors", "policies.npy",
                                     "costs/cert.npy", "costs/test.npy"}
    if _probe(here, LIBM_PROBE) != _probe(other, LIBM_PROBE):
        return  # an AVX-512 CPU: NumPy's float64 exp/log differ in the last bit, as documented
    # where exp/log round alike, no BLAS is left in the certificate's arithmetic: bit for bit
    for name in ("certificates/N500.json", "certificates/N1000.json"):
        a, b = (json.loads((tmp_path / d / name).read_text()) for d in ("here", "other"))
        for field in ("emp_cost", "kl", "klinv", "certified", "test_cost", "p"):
            assert a[field] == b[field], (name, field)


def test_serial_and_process_runs_agree(tmp_path: Path) -> None:
    run(load_config(small_toy(tmp_path)), tmp_path / "serial", progress=False)
    run(load_config(small_toy(tmp_path, kind="processes", workers=2, chunk_seeds=64)),
        tmp_path / "processes", progress=False)
    result = compare_runs(tmp_path / "serial", tmp_path / "processes")
    assert isinstance(result, Agreement), str(result)
    assert "certificate.json" in result.within_tolerance


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("compare")
    run(load_config(small_toy(tmp)), tmp / "run", progress=False)
    return tmp / "run"


@pytest.fixture
def twin(toy_run: Path, tmp_path: Path) -> Path:
    """A copy of the toy run, to be changed by a test."""
    return Path(shutil.copytree(toy_run, tmp_path / "twin"))


def _edit_json(path: Path, **fields: object) -> None:
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))


def test_a_changed_cost_is_named_by_entry(toy_run: Path, twin: Path) -> None:
    costs = np.load(twin / "costs/test.npy")
    costs[7, 3] = costs[7, 3] + 0.25 if costs[7, 3] < 0.5 else costs[7, 3] - 0.25
    np.save(twin / "costs/test.npy", costs)
    result = compare_runs(toy_run, twin)
    assert isinstance(result, Difference)
    assert result.artifact == "costs/test.npy"
    assert "[7, 3]" in result.detail and "Δ 0.25" in result.detail.replace("-", "")
    assert "1 of 12,000 entries differ" in result.detail


def test_a_certificate_moves_only_beyond_the_tolerance(toy_run: Path, twin: Path) -> None:
    path = twin / "certificates/N500.json"
    cert = json.loads(path.read_text())
    _edit_json(path, klinv=cert["klinv"] * (1 + TOLERANCE / 100), created="2031-01-01",
               content_sha256="0" * 64)
    assert isinstance(compare_runs(toy_run, twin), Agreement)
    p = list(cert["p"])
    p[4] += 1e-6
    _edit_json(path, p=p)
    result = compare_runs(toy_run, twin)
    assert isinstance(result, Difference)
    assert (result.artifact, result.detail.split(":")[0]) == ("certificates/N500.json",
                                                              "field p[4]")


def test_the_executor_section_is_not_part_of_the_contract(toy_run: Path, twin: Path) -> None:
    config = read_yaml(twin / "config.yaml")
    config["executor"] = {**config["executor"], "kind": "ray", "workers": 7}
    (twin / "config.yaml").write_text(yaml_text(config))
    assert isinstance(compare_runs(toy_run, twin), Agreement)
    config["seeds"]["test"] = [300_000, 301_000]
    (twin / "config.yaml").write_text(yaml_text(config))
    result = compare_runs(toy_run, twin)
    assert isinstance(result, Difference)
    assert result.detail.startswith("field seeds.test[0]: 200000 vs 300000")


def test_a_file_the_config_names_is_compared_by_its_content_not_its_place(
        toy_run: Path, twin: Path, tmp_path: Path) -> None:
    """A run frozen with an absolute path and its shipped copy naming the same bytes relatively
    agree; other bytes at the same place do not."""
    one = Path(shutil.copytree(toy_run, tmp_path / "one"))
    (tmp_path / "files").mkdir()
    shutil.copy(toy_run / "prior.safetensors", tmp_path / "files" / "p.safetensors")
    for run_dir, named in ((one, str((tmp_path / "files" / "p.safetensors").resolve())),
                           (twin, "../files/p.safetensors")):
        config = read_yaml(run_dir / "config.yaml")
        config["prior"] = named
        (run_dir / "config.yaml").write_text(yaml_text(config))
    assert isinstance(compare_runs(one, twin), Agreement)
    (tmp_path / "files" / "p.safetensors").write_bytes(b"other bytes")
    (tmp_path / "q.safetensors").write_bytes((toy_run / "prior.safetensors").read_bytes())
    config = read_yaml(one / "config.yaml")
    config["prior"] = str(tmp_path / "q.safetensors")
    (one / "config.yaml").write_text(yaml_text(config))
    result = compare_runs(one, twin)
    assert isinstance(result, Difference) and result.artifact == "config.yaml"
    assert result.detail.startswith("field prior: 'sha256 ")


def test_a_missing_artifact_and_a_changed_prior(toy_run: Path, twin: Path) -> None:
    (twin / "certificates/N1000.json").unlink()
    result = compare_runs(toy_run, twin)
    assert isinstance(result, Difference)
    assert result.artifact == "certificates/N1000.json"
    assert "first run only" in result.detail
    raw = bytearray((twin / "prior.safetensors").read_bytes())
    raw[-1] ^= 0x01  # an exponent bit of the last tensor's last entry (mu[7])
    (twin / "prior.safetensors").write_bytes(bytes(raw))
    result = compare_runs(toy_run, twin)
    assert isinstance(result, Difference) and result.artifact == "prior.safetensors"
    assert result.detail.startswith("tensor mu: first difference at [7]")


def test_the_command_exits_0_1_2(toy_run: Path, twin: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli(["compare", str(toy_run), str(twin)], capsys)
    assert rc == 0 and "agree" in out
    rc, out, _ = cli(["compare", str(toy_run), str(twin), "--json"], capsys)
    assert rc == 0 and json.loads(out)["agree"] is True
    costs = np.load(twin / "costs/cert.npy")
    costs[0, 0] = 1.0 - costs[0, 0]
    np.save(twin / "costs/cert.npy", costs)
    rc, out, err = cli(["compare", str(toy_run), str(twin)], capsys)
    assert rc == 1 and "costs/cert.npy" in err and "[0, 0]" in err
    rc, out, _ = cli(["compare", str(toy_run), str(twin), "--json"], capsys)
    assert rc == 1 and json.loads(out)["artifact"] == "costs/cert.npy"
    for bad in (tmp_path / "missing", tmp_path):
        rc, _, err = cli(["compare", str(toy_run), str(bad)], capsys)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and str(bad) in err

