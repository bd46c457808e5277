"""The front door (`pacplan.certify`, `pacplan.verify`, `pacplan.run`, `pacplan.Certificate`):
any array-like is certified, its numbers agree with an independent kl-inverse (scipy's root
finder, not pacplan's Newton iteration) and an independent posterior search, and bad input is
a `PacplanError` naming the Python argument, never a command-line flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize

import pacplan
from helpers import klinv_oracle
from pacplan.errors import PacplanError


def _bound_at(p: np.ndarray, costs: np.ndarray, delta: float) -> float:
    """The kl-inverse bound at posterior p with the uniform prior, from first principles."""
    m = costs.shape[1]
    emp = float(costs.mean(axis=0) @ p)
    nz = p[p > 0]
    kl_div = float(np.sum(nz * np.log(nz * m)))
    return klinv_oracle(min(max(emp, 0.0), 1.0), max(kl_div, 0.0), costs.shape[0], delta)


def _best_by_scipy(costs: np.ndarray, delta: float) -> float:
    """The smallest kl-inverse bound over the simplex, by Nelder–Mead on softmax logits and
    the m vertices and the uniform posterior: an independent posterior search."""
    m = costs.shape[1]

    def at(z: np.ndarray) -> float:
        w = np.exp(z - z.max())
        return _bound_at(w / w.sum(), costs, delta)

    best = min(at(np.zeros(m)), *(_bound_at(np.eye(m)[j], costs, delta) for j in range(m)))
    for start in (np.zeros(m), -costs.mean(axis=0) * 20):
        res = minimize(at, start, method="Nelder-Mead",
                       options={"xatol": 1e-8, "fatol": 1e-10, "maxiter": 4000})
        best = min(best, float(res.fun))
    return best


# --------------------------------------------------------------------------- the numbers

@pytest.mark.parametrize("n, rate", [(50, 0.0), (500, 0.1), (2000, 0.37), (30, 1.0)])
def test_one_policy_is_a_plain_test_set_bound(n: int, rate: float) -> None:
    """One column: KL = 0, and the certificate is the kl-inverse of the empirical mean."""
    rng = np.random.default_rng(n)
    costs = (rng.random(n) < rate).astype(float)  # 1-D: one policy
    cert = pacplan.certify(costs, delta=0.05)
    assert cert.m == 1 and cert.n == n and cert.p == [1.0] and cert.kl == 0.0
    expected = klinv_oracle(costs.mean(), 0.0, n, 0.05)
    assert cert.klinv == pytest.approx(expected, abs=1e-9)
    assert cert.klinv >= expected - 1e-12  # never below the exact bound
    assert cert.certified == min(cert.klinv, cert.quadratic, cert.mcallester)


@pytest.mark.parametrize("seed", range(4))
def test_random_matrices_against_an_independent_posterior_search(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(40, 400)), int(rng.integers(2, 6))
    costs = rng.random((n, m)) * rng.uniform(0.2, 1.0, size=m)
    cert = pacplan.certify(costs.tolist(), delta=0.01)  # a list of lists
    p = np.array(cert.p)
    assert p.shape == (m,) and p.min() >= 0 and p.sum() == pytest.approx(1.0, abs=1e-9)
    # the stated numbers are those of the stated posterior
    assert cert.emp_cost == pytest.approx(float(costs.mean(axis=0) @ p), abs=1e-9)
    assert cert.klinv == pytest.approx(_bound_at(p, costs, 0.01), abs=1e-7)
    # and no posterior scipy finds is better (to the optimizer's and search's tolerance)
    assert cert.certified <= _best_by_scipy(costs, 0.01) + 1e-6


def test_the_papers_matrix(paper_cert: np.ndarray, paper_test: np.ndarray) -> None:
    """The paper's UAV matrix (N = 4000 rows, m = 50): the kl-inverse of the stated posterior
    recomputed independently, and below the paper's quadratic-bound certificate (21.55 %)."""
    cert = pacplan.certify(paper_cert, delta=0.01, test=paper_test)
    p = np.array(cert.p)
    assert (cert.n, cert.m) == paper_cert.shape
    assert cert.klinv == pytest.approx(_bound_at(p, paper_cert, 0.01), abs=1e-7)
    assert cert.certified < 0.2155
    assert cert.test_cost == pytest.approx(float(paper_test.mean(axis=0) @ p), abs=1e-12)
    lo, hi = cert.test_ci
    assert lo <= cert.test_cost <= hi


def test_every_array_like_gives_the_same_certificate(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    costs = rng.random((300, 4)) < np.array([0.1, 0.3, 0.5, 0.2])  # booleans: failed or not
    np.save(tmp_path / "costs.npy", costs.astype(np.float64))
    forms = [costs, costs.astype(np.float32), costs.astype(int).tolist(),
             tuple(map(tuple, costs.astype(float))), tmp_path / "costs.npy",
             str(tmp_path / "costs.npy")]
    certs = [pacplan.certify(form, delta=0.01) for form in forms]
    for c in certs:
        assert isinstance(c, pacplan.Certificate)
        assert c.certified == pytest.approx(certs[0].certified, rel=1e-12)
        assert (c.n, c.m) == (300, 4)


def test_a_file_certificate_saves_and_verifies(tmp_path: Path) -> None:
    costs = np.random.default_rng(3).random((200, 3))
    np.save(tmp_path / "costs.npy", costs)
    np.save(tmp_path / "test.npy", costs[:50])
    cert = pacplan.certify(tmp_path / "costs.npy", test=tmp_path / "test.npy", delta=0.05)
    cert.save(tmp_path / "certificate.json")
    checked = pacplan.verify(tmp_path / "certificate.json")
    assert checked.certified == pytest.approx(cert.certified, rel=1e-12)
    data = json.loads(cert.to_json())
    assert data == json.loads((tmp_path / "certificate.json").read_text()) | {
        "cert_matrix": data["cert_matrix"], "test_matrix": data["test_matrix"]}
    assert data["p"] == cert.p and data["certified"] == cert.certified
    assert "expected cost ≤" in str(cert) and f"N = {cert.n}" in str(cert)


def test_an_in_memory_certificate_is_not_saved_unverifiable(tmp_path: Path) -> None:
    cert = pacplan.certify(np.full((20, 2), 0.5))
    with pytest.raises(PacplanError, match=r"given in memory.*numpy\.save"):
        cert.save(tmp_path / "certificate.json")
    assert list(tmp_path.iterdir()) == []
    assert json.loads(cert.to_json())["certified"] == cert.certified


def test_clip_is_named_as_the_python_argument() -> None:
    costs = np.array([[0.2, 1.5], [0.0, -0.1], [0.3, 0.4]])
    with pytest.raises(PacplanError) as info:
        pacplan.certify(costs)
    message = str(info.value)
    assert "clip=True" in message and "--clip" not in message
    assert message.startswith("costs:") and "2 costs lie outside [0, 1]" in message
    cert = pacplan.certify(costs, clip=True)
    assert cert.clip and cert.cert_matrix.clipped == 2
    assert cert.certified == pytest.approx(
        pacplan.certify(np.clip(costs, 0, 1)).certified, rel=1e-12)


@pytest.mark.parametrize("kwargs, named", [
    ({"costs": [[0.1, float("nan")], [0.2, 0.3]]},
     "costs: 1 cost entries are NaN (first: row 0, column 1)"),
    ({"costs": np.zeros((2, 2, 2))}, "costs: cost matrix must be 2-D"),
    ({"costs": np.zeros((0, 3))}, "costs: cost matrix is empty"),
    ({"costs": 0.5}, "costs: cost matrix must be 2-D"),
    ({"costs": [[0.1, 0.2], [0.3]]}, "costs: not a matrix of numbers"),
    ({"costs": [["a", "b"]]}, "costs: costs must be numbers"),
    ({"costs": [[0.1, 0.2]], "test": [[0.1, 0.2, 0.3]]}, "test has 3 columns but costs has 2"),
    ({"costs": [[0.1, 0.2]], "test": [[0.1, 7.0]]}, "test: 1 costs lie outside"),
    ({"costs": [[0.1]], "delta": 0.0}, "delta must lie in (0, 1)"),
    ({"costs": [[0.1]], "delta": 1.0}, "delta must lie in (0, 1)"),
    ({"costs": [[0.1]], "delta": float("nan")}, "delta must be a finite number"),
    ({"costs": [[0.1]], "delta": "0.1"}, "delta must be a number"),
    ({"costs": [[0.1]], "bound": "kl"}, "unknown bound 'kl'"),
    ({"costs": [[0.1]], "solver": "cvx"}, "unknown solver 'cvx'"),
    ({"costs": [[0.1]], "clip": "yes"}, "clip must be True or False"),
    ({"costs": "missing.npy"}, "costs (missing.npy): no such file"),
    ({"costs": [[0.1]], "delta": 10**400}, "delta must be a finite number"),
])
def test_bad_input_names_the_argument(kwargs: dict, named: str, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    costs = kwargs.pop("costs")
    with pytest.raises(PacplanError) as info:
        pacplan.certify(costs, **kwargs)
    message = str(info.value)
    assert named in message
    assert "\n" not in message and "--" not in message


def test_a_torch_tensor_with_gradients_is_certified_as_its_values() -> None:
    """numpy refuses a tensor that requires grad (a RuntimeError traceback before); its values
    are the costs, for `costs` and `test` alike."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    costs, test = rng.random((60, 3)), rng.random((20, 3))
    want = pacplan.certify(costs, test=test, delta=0.05)
    got = pacplan.certify(torch.tensor(costs, requires_grad=True),
                          test=torch.tensor(test, requires_grad=True), delta=0.05)
    assert got.certified == want.certified and got.test_cost == want.test_cost
    assert got.cert_matrix.sha256 == want.cert_matrix.sha256
    half = pacplan.certify(torch.tensor(costs, dtype=torch.bfloat16, requires_grad=True))
    assert half.n == 60 and half.m == 3


@pytest.mark.parametrize("path", [123, None, b"cert.json", ["cert.json"]])
def test_verify_refuses_what_is_not_a_path_naming_the_argument(path: object) -> None:
    with pytest.raises(PacplanError) as info:
        pacplan.verify(path)  # type: ignore[arg-type]
    message = str(info.value)
    assert message.startswith("path must be a certificate file or planner directory")
    assert type(path).__name__ in message and "\n" not in message


def test_a_certificate_is_never_saved_over_its_own_matrices(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch
                                                             ) -> None:
    """`pacplan.certify("c.npy").save("c.npy")` replaced the costs with the certificate: the
    one overwrite rule (`pacplan.io.outputs`) refuses it, as `certify-matrix --out` does, by
    any spelling of the path (a hard link too), and for the test matrix."""
    monkeypatch.chdir(tmp_path)
    costs = np.random.default_rng(2).random((40, 3))
    np.save("c.npy", costs)
    np.save("t.npy", costs[:10])
    (tmp_path / "sub").mkdir()
    os.link("c.npy", "sub/linked.npy")
    cert = pacplan.certify("c.npy", test="t.npy")
    for out, which in (("c.npy", "cost matrix"), (tmp_path / "c.npy", "cost matrix"),
                       ("sub/../c.npy", "cost matrix"), ("sub/linked.npy", "cost matrix"),
                       ("t.npy", "test matrix")):
        with pytest.raises(PacplanError) as info:
            cert.save(out)
        assert str(info.value) == (f"path {out} is the input {which}; writing there would "
                                   "destroy it: choose another output path")
    np.testing.assert_array_equal(np.load("c.npy", allow_pickle=False), costs)
    np.testing.assert_array_equal(np.load("t.npy", allow_pickle=False), costs[:10])
    assert pacplan.verify(cert.save("cert.json")).certified == cert.certified


# --------------------------------------------------------------------------- run and verify

TINY = {"name": "toy-tiny", "world": {"name": "toy", "options": {"dim": 4}},
        "seeds": {"prior": [0, 50], "cert": [1000, 1200], "test": [2000, 2100]},
        "es": {"iterations": 4, "envs_per_iter": 4, "pairs_per_env": 2},
        "policies": {"m": 5, "seed": 0}, "certificate": {"n": [100, 200], "delta": 0.01}}


def test_run_a_dict_then_verify_and_resume(tmp_path: Path) -> None:
    out = tmp_path / "runs" / "tiny"
    result = pacplan.run(TINY, out, progress=False)
    assert sorted(result.certificates) == [100, 200] and result.run_dir == out
    assert (out / "report.md").is_file()
    checked = pacplan.verify(out / "certificate.json")
    assert checked.n == 200 and checked.certified == result.certificates[200].certified
    # the certificate is that of its stored matrix (an independent recomputation)
    costs = np.load(out / "costs" / "cert.npy", allow_pickle=False)[:200]
    assert checked.klinv == pytest.approx(_bound_at(np.array(checked.p), costs, 0.01),
                                          abs=1e-7)
    again = pacplan.run(TINY, out, progress=False, report=False)  # resumes: same numbers
    assert again.certificates[200].certified == result.certificates[200].certified


def test_run_errors_name_python_arguments(tmp_path: Path) -> None:
    out = tmp_path / "tiny"
    pacplan.run(TINY, out, progress=False, report=False)
    changed = TINY | {"policies": {"m": 6, "seed": 0}}
    with pytest.raises(PacplanError) as info:
        pacplan.run(changed, out, progress=False, report=False)
    assert "use a new out directory" in str(info.value) and "--" not in str(info.value)
    with pytest.raises(PacplanError, match="workers must be an integer >= 1"):
        pacplan.run(TINY, tmp_path / "w", workers=0)
    with pytest.raises(PacplanError, match="config must be a preset name"):
        pacplan.run(42, tmp_path / "x")  # type: ignore[arg-type]
    with pytest.raises(PacplanError, match="no config file or preset named 'toy-quik'"):
        pacplan.run("toy-quik", tmp_path / "x")
    with pytest.raises(PacplanError, match="unknown field"):
        pacplan.run(TINY | {"bogus": 1}, tmp_path / "y")
    for kwargs, words in (({"progress": "no"}, "progress must be True or False, got 'no'"),
                          ({"report": None}, "report must be True or False, got None"),
                          ({"prior": 5}, r"prior must be a path \(a str or os.PathLike\), got int"),
                          ({"address": 5}, "address must be a Ray cluster address")):
        with pytest.raises(PacplanError, match=words):  # a TypeError, or accepted, before
            pacplan.run(TINY, tmp_path / "x", **kwargs)
    with pytest.raises(PacplanError, match=r"out must be a path \(a str or os.PathLike\)"):
        pacplan.run(TINY, 5)  # type: ignore[arg-type]
    # nothing was left half-made by the refused runs
    assert not (tmp_path / "w").exists() and not (tmp_path / "x").exists()
    assert not (tmp_path / "y").exists()


def test_verify_names_the_problem(tmp_path: Path) -> None:
    costs = np.random.default_rng(1).random((50, 2))
    np.save(tmp_path / "c.npy", costs)
    pacplan.certify(tmp_path / "c.npy").save(tmp_path / "cert.json")
    np.save(tmp_path / "c.npy", costs[::-1])  # the matrix changed after certification
    with pytest.raises(PacplanError, match="sha256"):
        pacplan.verify(tmp_path / "cert.json")
    with pytest.raises(PacplanError, match="no such certificate file"):
        pacplan.verify(tmp_path / "none.json")


# --------------------------------------------------------------------------- the package

def test_import_stays_light_and_run_stays_callable() -> None:
    """`pacplan.run` and `pacplan.certify_policy` are the functions themselves, whatever was
    imported before (no package shares their names: `pacplan.pipeline`,
    `pacplan.policy_certification`)."""
    code = ("import sys, pacplan; heavy = [m for m in ('pacplan.api', 'torch', "
            "'pacplan.pipeline.pipeline', 'scipy') if m in sys.modules]; print(heavy); "
            "import gymnasium; print('pacplan/UAVObstacleField-v0' in gymnasium.registry); "
            "import pacplan.pipeline.pipeline, pacplan.policy_certification.seeds; "
            "from pacplan.policy_certification import certify; "
            "print(pacplan.run is pacplan.api.run, "
            "pacplan.certify_policy is certify.certify_policy, "
            "pacplan.certify is pacplan.api.certify, sorted(pacplan.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.splitlines()
    assert out[0] == "[]"
    assert out[1] == "True"
    assert out[2] == ("True True True ['Certificate', 'NotCheckedWarning', 'PacplanError', "
                      "'SensorFaultWarning', 'UnidentifiedInputWarning', '__version__', "
                      "'certify', 'certify_policy', 'run', 'verify']")
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pacplan.nope  # noqa: B018


def test_certify_policy_is_one_call_and_verifies(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A callable policy certified from Python in one call, against an independent kl-inverse
    of the costs it stored (CartPole's return normalised by its 0..200 bounds)."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    result = pacplan.certify_policy("CartPole-v1", ["user_policies:lean"], n=30, horizon=200,
                                    return_bounds=(0, 200), out=tmp_path / "lean")
    costs = np.load(tmp_path / "lean" / "costs" / "cert.npy")
    assert costs.shape == (30, 1) and 0 < costs.mean() < 1
    expected = klinv_oracle(float(costs.mean()), 0.0, 30, 0.01)
    assert result.certificate.certified == pytest.approx(expected, rel=1e-9)
    assert pacplan.verify(result.certificate_path).certified == result.certificate.certified


def test_deep_run_errors_are_written_in_the_callers_spelling(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The run directory's name travels with it (`RunDir.option`): a damaged frozen config,
    refused deep in the pipeline, names `out` in Python and `--out` on the command line,
    written so the first time (pacplan.run no longer rewords messages)."""
    import yaml

    from helpers import cli

    out = tmp_path / "tiny"
    pacplan.run(TINY, out, progress=False, report=False)
    (out / "config.yaml").write_text("- not a mapping\n")
    with pytest.raises(PacplanError) as info:
        pacplan.run(TINY, out, progress=False, report=False)
    assert str(info.value).endswith("restore it, or use a new out directory"), info.value
    config = tmp_path / "tiny.yaml"
    config.write_text(yaml.safe_dump(TINY))
    code, _, err = cli(["run", str(config), "--out", str(out), "--quiet"], capsys)
    assert code != 0 and "restore it, or use a new --out directory" in " ".join(err.split())
