"""`pacplan plan-n` and rational cost storage (issue 23).

Oracles: the paper's published UAV matrix (a prediction from its first rows against the
certificate its later rows give), a brute-force scan of the bound over the Gibbs curve from an
independent formula, and the same run stored as float64 .npy and as rational numerators
(identical certificates).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import SMALL_TOY_RUN, StopAfter, cli
from pacplan.config import load_config, parse_config
from pacplan.errors import PacplanError
from pacplan.io.files import safetensors_bytes
from pacplan.io.yamlio import read_yaml, yaml_text
from pacplan.pacbayes import bounds
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import CostMatrix, matrix_from_bytes, rational_bytes, sha256_array
from pacplan.pacbayes.posterior import DECISION_TOLERANCE, column_means, optimize_gibbs_means
from pacplan.pipeline.compare import Agreement, compare_runs
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.plan import plan_n
from pacplan.pipeline.provenance import verify_certificate
from pacplan.pipeline.rundir import RunDir
from pacplan.presets import preset_path

# ----------------------------------------------------------------------- rational storage


def test_rational_storage_round_trips_exactly_and_is_small(paper_cert: np.ndarray) -> None:
    k = np.rint(paper_cert * 239).astype(np.int64)  # the paper's code: 239 checks, float32
    assert np.all(np.abs(paper_cert * 239 - k) < 1e-4)
    exact = k / 239.0
    data = rational_bytes(exact, 239, "paper")
    assert len(data) < exact.nbytes / 7  # one byte per entry instead of eight
    back = matrix_from_bytes(data, "paper")
    assert back.dtype == np.float64 and np.array_equal(back, exact)
    assert rational_bytes(back, 239, "again") == data  # deterministic bytes
    with pytest.raises(PacplanError, match="not a multiple of 1/240"):
        rational_bytes(exact, 240, "paper")


def test_rational_storage_refuses_what_it_cannot_hold_exactly() -> None:
    values = np.full((3, 2), 0.5)
    values[1, 1] = 0.123
    with pytest.raises(PacplanError, match=r"entry \(1, 1\) = 0.123 is not a multiple of 1/240"):
        rational_bytes(values, 240, "costs")
    with pytest.raises(PacplanError, match="denominator must be in 1…65535"):
        rational_bytes(values, 0, "costs")


@pytest.mark.parametrize(("tensors", "meta", "words"), [
    ({"numerators": np.zeros((2, 2), np.int8)}, {"format": "pacplan-rational-costs",
                                                "denominator": "240"}, "unsigned integer"),
    ({"numerators": np.zeros(4, np.uint8)}, {"format": "pacplan-rational-costs",
                                            "denominator": "240"}, "2-D"),
    ({"numerators": np.zeros((2, 2), np.uint8)}, {"format": "pacplan-rational-costs",
                                                 "denominator": "-3"}, "denominator '-3'"),
    ({"numerators": np.zeros((2, 2), np.uint8)}, {"format": "weights"}, "not a rational"),
    ({"numerators": np.zeros((2, 2), np.uint8), "x": np.zeros(1, np.uint8)},
     {"format": "pacplan-rational-costs", "denominator": "240"}, "not a rational"),
])
def test_a_bad_rational_file_is_one_line(tensors: dict, meta: dict, words: str) -> None:
    with pytest.raises(PacplanError) as info:
        matrix_from_bytes(safetensors_bytes(tensors, meta), "m.safetensors")
    assert words in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(PacplanError, match=r"neither a \.npy array nor a rational"):
        matrix_from_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ", "m.safetensors")
    with pytest.raises(PacplanError, match=r"not a \.npy file \(it is empty\)"):
        matrix_from_bytes(b"", "m.npy")


def _tiny_uav(tmp_path: Path, denominator: int | None) -> Path:
    """uav-quick cut to seconds: 4 policies, N = 24, 16 test environments, no compile."""
    data = read_yaml(preset_path("uav-quick"))
    data["name"] = "tiny-uav"
    data["prior"] = str(preset_path("uav-quick").parent / data["prior"])
    data["world"]["options"]["compile"] = False
    data["policies"]["m"] = 4
    data["seeds"]["cert"] = [100_000, 100_024]
    data["seeds"]["test"] = [200_000, 200_016]
    data["certificate"]["n"] = [12, 24]
    data["executor"].update(chunk_seeds=8, chunk_policies=4)
    data["storage"] = {"cost_denominator": denominator}
    path = tmp_path / f"tiny-{denominator}.yaml"
    path.write_text(yaml_text(data))
    return path


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("storage")
    for d in (None, 240):
        run(load_config(_tiny_uav(tmp, d)), tmp / f"run-{d}", progress=False)
    return tmp / "run-None", tmp / "run-240"


def test_a_rational_run_certifies_what_the_float_run_does(tiny_runs: tuple[Path, Path]) -> None:
    floats, rational = tiny_runs
    assert (rational / "costs/cert.safetensors").is_file()
    assert not (rational / "costs/cert.npy").exists()
    # the same costs: k/240 is the exact cost correctly rounded, the world's own float
    # arithmetic (1 − t_c/T) can differ from it in the last bit
    world = np.load(floats / "costs/cert.npy")
    stored = matrix_from_bytes((rational / "costs/cert.safetensors").read_bytes(), "cert")
    assert np.array_equal(np.rint(world * 240), stored * 240)
    assert np.all(np.abs(world - stored) <= np.spacing(1.0))
    assert 0 < np.count_nonzero(stored) < stored.size  # some flights collide, some do not
    a = verify_certificate(floats / "certificate.json")
    b = verify_certificate(rational / "certificate.json")
    assert b.cert_matrix.path.endswith("cert.safetensors")
    for field in ("certified", "emp_cost", "kl", "test_cost"):
        assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-12, abs=1e-15)


def test_a_rational_run_reports_and_resumes(tiny_runs: tuple[Path, Path],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    _, rational = tiny_runs
    rc, _, err = cli(["report", str(rational)], capsys)
    assert rc == 0, err
    before = (rational / "certificate.json").read_text()
    run(load_config(rational / "config.yaml"), rational, progress=False)  # nothing recomputed
    after = json.loads((rational / "certificate.json").read_text())
    assert after["certified"] == json.loads(before)["certified"]
    assert isinstance(compare_runs(rational, rational), Agreement)


def test_a_forged_rational_matrix_is_refused(tiny_runs: tuple[Path, Path],
                                             tmp_path: Path) -> None:
    import shutil

    _, rational = tiny_runs
    copy = Path(shutil.copytree(rational, tmp_path / "copy"))
    path = copy / "costs/cert.safetensors"
    values = matrix_from_bytes(path.read_bytes(), "cert")
    values[:] = 0.0  # a perfect planner, stored in the same exact format
    path.write_bytes(rational_bytes(values, 240, "forged"))
    with pytest.raises(PacplanError, match="sha256"):
        verify_certificate(copy / "certificate.json")


# ----------------------------------------------------------------------- plan-n


def _brute_force_bound(cbar: np.ndarray, n: int, delta: float) -> float:
    """min over a dense β grid of the smallest of the three bounds at the Gibbs posterior."""
    best = np.inf
    shift = cbar - cbar.min()
    for beta in np.concatenate([[0.0], np.geomspace(1e-2, 1e5, 2000)]):
        w = np.exp(-beta * shift)
        p = w / w.sum()
        emp = float(np.sum(p * cbar))
        kl = float(np.sum(p[p > 0] * np.log(p[p > 0] * cbar.size)))
        best = min(best, min(bounds.all_bounds(emp, kl, n, delta).values()))
    return best


def test_the_search_from_means_matches_brute_force(paper_cert: np.ndarray) -> None:
    cbar = column_means(paper_cert[:1000])
    for n in (1000, 4000, 100_000):
        got = optimize_gibbs_means(cbar, n, 0.01, "best").value
        assert got == pytest.approx(_brute_force_bound(cbar, n, 0.01), abs=2e-6)
        assert got <= _brute_force_bound(cbar, n, 0.01) * (1 + DECISION_TOLERANCE) + 1e-12


def test_a_prediction_from_1000_rows_meets_the_certificate_at_4000(
        tmp_path: Path, paper_cert: np.ndarray) -> None:
    """On the paper's own matrix: the means of the first 1000 rows predict N = 4000's
    certificate to within sampling noise (Table 1: C_QPAC 21.55 % at N = 4000)."""
    actual = build_certificate(CostMatrix(values=paper_cert, path=None,
                                          sha256=sha256_array(paper_cert), rows=4000,
                                          clipped=0), 0.01).certified
    predicted = optimize_gibbs_means(column_means(paper_cert[:1000]), 4000, 0.01).value
    assert 0.20 < actual < 0.2155  # kl-inverse: below the paper's C_QPAC
    assert abs(predicted - actual) < 0.01


def test_plan_n_on_a_run(tiny_runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    floats, rational = tiny_runs
    for d in (floats, rational):
        plan = plan_n(d, 24, rows=12)
        cert12 = json.loads((d / "certificates/N12.json").read_text())["certified"]
        assert plan.certified_at_rows == pytest.approx(cert12, rel=1e-9)
        assert plan.rollouts == 24 * 4 and plan.rollouts_more == 0
        far = plan_n(d, 10_000, rows=24)
        assert far.rollouts_more == (10_000 - 24) * 4
        assert far.predicted_seconds is not None and far.predicted_seconds > 0
    rc, out, _ = cli(["plan-n", str(floats), "--target-n", "1000", "--json"], capsys)
    assert rc == 0 and json.loads(out)["target_n"] == 1000
    assert 0 < json.loads(out)["predicted_certified"] < 1


@pytest.mark.parametrize(("args", "words"), [
    (["--target-n", "100", "--rows", "25"], "--rows 25: the certification matrix has 24 rows"),
    (["--target-n", "10", "--rows", "12"], "--target-n 10 is below --rows 12"),
])
def test_plan_n_bad_input_is_one_line(tiny_runs: tuple[Path, Path], args: list[str],
                                      words: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = cli(["plan-n", str(tiny_runs[0]), *args], capsys)
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1


def test_plan_n_while_a_rational_run_still_computes(tmp_path: Path) -> None:
    """A large run stores rational costs (storage.cost_denominator) and is predicted from its
    first rows while it computes (issue 38: uav-tight): its chunks hold the costs as computed,
    so the prediction is the one its float twin, stopped at the same chunk, gives."""
    plans = []
    for denominator in (None, 240):
        data = {**SMALL_TOY_RUN, "storage": {"cost_denominator": denominator},
                "executor": {"kind": "serial", "chunk_policies": 6, "chunk_seeds": 10}}
        out = tmp_path / f"run-{denominator}"
        with pytest.raises(KeyboardInterrupt):  # rows 0–29 computed, the matrix not assembled
            run(parse_config(json.loads(json.dumps(data))), out, progress=False,
                executor=StopAfter(3, chunk_policies=6, chunk_seeds=10))
        assert not (out / RunDir.costs("cert", denominator is not None)).exists()
        plans.append(plan_n(out, 1000, rows=30))
    assert plans[0].predicted_certified == plans[1].predicted_certified
    assert 0 < plans[1].emp_cost < plans[1].predicted_certified < 1
    with pytest.raises(PacplanError, match="--rows 40: the certification matrix has 30 rows"):
        plan_n(tmp_path / "run-240", 1000, rows=40)


def test_plan_n_without_a_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = cli(["plan-n", str(tmp_path), "--target-n", "10"], capsys)
    assert rc == 2 and "not a run directory" in err
    (tmp_path / "config.yaml").write_text(preset_path("toy").read_text())
    rc, _, err = cli(["plan-n", str(tmp_path), "--target-n", "10"], capsys)
    assert rc == 2 and "no finished certification matrix" in err


# ----------------------------------------------------------------------- the shipped result

RESULTS = Path(__file__).resolve().parents[2] / "results"


@pytest.mark.parametrize("name", ["uav-tight", "uav-paper-net-tight", "uav-es-tight"])
def test_the_shipped_tight_result_verifies_and_was_predicted(name: str) -> None:
    """results/uav-tight (the shipped conv prior at N = 100,000, issue 52), its paper-net twin
    (issue 38) and results/uav-es-tight (the ES-only prior, issue 23): stored exactly and small,
    verify, and plan-n from their first 4000 rows predicts their N = 100,000 certificate within
    0.3 points. Small: all but policies.npy, which is drawn from the prior (the conv net's 50
    policies are 25.6 MB, the same bytes as results/uav's, so one blob in git)."""
    tight = RESULTS / name
    sizes = sum(p.stat().st_size for p in tight.rglob("*")
                if p.is_file() and p.name != "policies.npy")
    assert sizes < 15e6
    c = verify_certificate(tight / "certificate.json")
    assert c.n == 100_000 and c.m == 50 and c.cert_matrix.path.endswith(".safetensors")
    plan = plan_n(tight, 100_000, rows=4000)
    assert abs(plan.predicted_certified - c.certified) <= 0.003
