"""benchmarks/paired_runs.py: two shipped quadruped runs (the taught and the ES-only prior, the
same world and test seeds) paired on their test environments. Oracle: each certificate's p
times its stored test matrix, computed here with plain numpy; bad input is one line, exit 2."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import assert_refused, cli, load_script, run_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "paired_runs.py"
TAUGHT, ES = ROOT / "results" / "quadruped", ROOT / "results" / "quadruped-es"


def _posterior_costs(run: Path, n: int) -> np.ndarray:
    cert = json.loads((run / "certificates" / f"N{n}.json").read_text())
    return np.load(run / "costs" / "test.npy", allow_pickle=False) @ np.asarray(cert["p"])


def test_the_difference_is_the_posteriors_on_the_same_terrains() -> None:
    res = run_script(SCRIPT, str(TAUGHT), str(ES), "--n-a", "1000", "--n-b", "1000")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    d = _posterior_costs(TAUGHT, 1000) - _posterior_costs(ES, 1000)
    assert out["n"] == [1000, 1000] and out["environments"] == d.size == 1000
    assert out["a_minus_b"] == pytest.approx(d.mean(), abs=1e-6)
    assert out["test_cost"][0] - out["test_cost"][1] == pytest.approx(d.mean(), abs=2e-6)
    lower, higher, tied = out["a_lower_higher_tied"]
    assert (lower, higher) == ((d < -1e-12).sum(), (d > 1e-12).sum()) and lower + higher + tied \
        == d.size
    lo, hi = out["a_minus_b_ci99"]
    # a 99 % interval of a mean of 1000 costs: around the mean, far narrower than the costs' range
    assert lo < out["a_minus_b"] < hi and hi - lo < 0.1 * (d.max() - d.min())
    swapped = json.loads(run_script(SCRIPT, str(ES), str(TAUGHT), "--n-a", "1000", "--n-b",
                                    "1000").stdout)
    assert swapped["a_minus_b"] == pytest.approx(-out["a_minus_b"], abs=1e-6)
    assert swapped["a_lower_higher_tied"] == [higher, lower, tied]


@pytest.mark.parametrize("other,args,names", [
    ("uav", [], "worlds differ"),
    ("quadruped-mujoco", [], "test seeds differ"),
    ("quadruped-es", ["--n-b", "7"], "no certificate for N = 7"),
    ("nope", [], "no certificate.json"),
])
def test_bad_input_is_one_line_and_exit_2(other: str, args: list[str], names: str) -> None:
    assert_refused(run_script(SCRIPT, str(TAUGHT), str(ROOT / "results" / other), *args), names)


def test_a_test_matrix_that_changed_is_refused(tmp_path: Path) -> None:
    run = Path(shutil.copytree(TAUGHT, tmp_path / "run",
                               ignore=shutil.ignore_patterns("figures", "report*", "crossval")))
    test = np.load(run / "costs" / "test.npy")
    test[0, 0] = 1.0 - test[0, 0]
    np.save(run / "costs" / "test.npy", test)
    assert_refused(run_script(SCRIPT, str(run), str(ES)), "test")


def test_two_uav_policy_families_pair_on_the_same_environments() -> None:
    """results/uav (the shipped conv prior, issue 52) against results/uav-paper-net: the
    policy family is not the world, so they pair; the difference is the posteriors' on the same
    5000 test environments."""
    conv, paper = ROOT / "results" / "uav", ROOT / "results" / "uav-paper-net"
    res = run_script(SCRIPT, str(conv), str(paper))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    d = _posterior_costs(conv, 4000) - _posterior_costs(paper, 4000)
    assert out["environments"] == d.size == 5000
    assert out["a_minus_b"] == pytest.approx(d.mean(), abs=1e-6)


@pytest.mark.kernel_free  # same-machine agreement: the script's difference and the matrices'
def test_runs_stored_as_rationals_pair() -> None:
    """results/uav-tight against results/uav-paper-net-tight (issue 52): both store their costs
    as one-byte numerators over 240 (storage.cost_denominator), which the pairing reads as the
    certificate does; the oracle decodes them here with safetensors alone."""
    from safetensors.numpy import safe_open

    def costs(run: Path) -> np.ndarray:
        cert = json.loads((run / "certificate.json").read_text())
        with safe_open(str(run / "costs" / "test.safetensors"), "np") as f:
            denominator = int(f.metadata()["denominator"])
            test = f.get_tensor("numerators").astype(np.float64) / denominator
        return test @ np.asarray(cert["p"])

    conv, paper = ROOT / "results" / "uav-tight", ROOT / "results" / "uav-paper-net-tight"
    res = run_script(SCRIPT, str(conv), str(paper))
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    d = costs(conv) - costs(paper)
    assert out["n"] == [100_000, 100_000] and out["environments"] == d.size == 50_000
    assert out["a_minus_b"] == pytest.approx(d.mean(), abs=1e-6)


def test_a_stratum_splits_the_pairing_by_the_worlds_predicate() -> None:
    """--stratum steep pairs the two posteriors inside and outside the quadruped's `steep`
    stratum. Oracle: the first ridge's slope drawn here from the seed with numpy (the world's
    first uniform draw in [0°, 23.3°)), at least 20°."""
    res = run_script(SCRIPT, str(TAUGHT), str(ES), "--n-a", "1000", "--n-b", "1000",
                     "--stratum", "steep")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    seeds = range(*out["test_seeds"])
    steep = np.array([np.random.default_rng(s).uniform(0.0, 23.3) >= 20.0 for s in seeds])
    d = _posterior_costs(TAUGHT, 1000) - _posterior_costs(ES, 1000)
    split = out["by_stratum"]
    assert split["stratum"] == "steep" and 0 < steep.sum() < steep.size
    for part, mask in (("inside", steep), ("outside", ~steep)):
        assert split[part]["environments"] == mask.sum()
        assert split[part]["a_minus_b"] == pytest.approx(d[mask].mean(), abs=1e-6)
        lo, hi = split[part]["a_minus_b_ci99"]
        assert lo <= split[part]["a_minus_b"] <= hi
    # the whole pairing is unchanged by the split
    assert out["a_minus_b"] == pytest.approx(d.mean(), abs=1e-6)


def test_an_unknown_stratum_is_refused_naming_the_worlds_strata() -> None:
    assert_refused(run_script(SCRIPT, str(TAUGHT), str(ES), "--stratum", "flat"),
                   "unknown stratum 'flat'")


def test_a_stratum_holding_no_test_environment_is_refused() -> None:
    """The toy world with shift 0 puts no goal in its `far` stratum: nothing to split."""
    from pacplan.errors import PacplanError

    bench = load_script(SCRIPT)
    with pytest.raises(PacplanError, match="holds none of the 30 test environments"):
        bench.by_stratum({"name": "toy", "options": {"shift": 0.0}}, [0, 30], "far",
                         np.zeros(30), np.zeros(30))


def test_certificates_of_bare_matrices_are_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`pacplan certify-matrix` records no test seeds: nothing says which environments its
    test rows were, so two such certificates do not pair (a KeyError before)."""
    rng = np.random.default_rng(0)
    np.save(tmp_path / "c.npy", (rng.random((200, 5)) < 0.2).astype(np.float64))
    np.save(tmp_path / "t.npy", (rng.random((100, 5)) < 0.2).astype(np.float64))
    for run in ("a", "b"):
        code, _, err = cli(["certify-matrix", str(tmp_path / "c.npy"), "--test",
                            str(tmp_path / "t.npy"), "--out",
                            str(tmp_path / run / "certificate.json")], capsys)
        assert code == 0, err
    assert_refused(run_script(SCRIPT, str(tmp_path / "a"), str(tmp_path / "b")),
                   "records no test seeds")
