"""A screened run (`certificate.screen`) on the toy world: every policy on the first rows, the
kept ones on the rest and on the test set; the certificates verify in their run directory.

Oracle: the toy world's closed-form costs, computed here independently of the pipeline.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import CountingExecutor, StopAfter
from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pacbayes.posterior import optimize_gibbs
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.provenance import verify_certificate
from pacplan.report.document import write_report
from pacplan.worlds.toy import ToyWorld

BASE = {
    "name": "toy-screen",
    "world": {"name": "toy", "options": {"dim": 6, "shift": 0.3}},
    "seeds": {"prior": [0, 300], "cert": [10_000, 10_240], "test": [20_000, 20_200]},
    "es": {"iterations": 8, "envs_per_iter": 6, "pairs_per_env": 3, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 40},
    "policies": {"m": 12, "seed": 3},
    "certificate": {"n": [60, 120, 240], "delta": 0.05, "screen": {"rows": 80, "keep": 3}},
    "baselines": [{"name": "zeros"}],
    "report": {"trajectories": 0},
}


def _cfg(**certificate):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["certificate"].update(certificate)
    return parse_config(data)


@pytest.fixture(scope="module")
def screened(tmp_path_factory) -> tuple[Path, CountingExecutor]:
    out = tmp_path_factory.mktemp("screened")
    ex = CountingExecutor(chunk_policies=4, chunk_seeds=40)
    run(_cfg(), out, progress=False, executor=ex)
    return out, ex


def test_screened_run_computes_only_the_kept_policies_beyond_the_first_rows(screened):
    out, ex = screened
    # ES (8 iterations × 6 environments × 3 antithetic pairs), then 80 rows × 12 policies,
    # 160 rows × 3 and 200 test × 3, and the baseline's 200
    assert ex.cells == 8 * 6 * 3 * 2 + 80 * 12 + 160 * 3 + 200 * 3 + 200
    thetas = np.load(out / "policies.npy")
    world = ToyWorld(dim=6, shift=0.3)
    first = world.costs(thetas, np.arange(10_000, 10_080))
    kept = sorted(np.argsort(first.mean(axis=0), kind="stable")[:3].tolist())
    np.testing.assert_array_equal(np.load(out / "costs" / "cert.npy"), first)
    np.testing.assert_array_equal(np.load(out / "costs" / "cert-screened.npy"),
                                  world.costs(thetas[kept], np.arange(10_000, 10_240)))
    np.testing.assert_array_equal(np.load(out / "costs" / "test.npy"),
                                  world.costs(thetas[kept], np.arange(20_000, 20_200)))
    for n in (60, 120, 240):
        c = verify_certificate(out / "certificates" / f"N{n}.json")
        assert c.columns == kept and c.m == 12 and c.n == n and c.test_n == 200
        assert c.kl >= math.log(12 / 3) - 1e-12  # KL against all 12, mass on 3
        full = world.costs(thetas, np.arange(10_000, 10_000 + n))
        assert c.certified >= optimize_gibbs(full, 0.05, "best").value - 1e-12
    assert json.loads((out / "manifest.json").read_text())["costs/test.npy"]["inputs"][
        "columns"] == kept


def test_screened_run_resumes_computing_nothing_and_reports(screened):
    out, _ = screened
    ex = CountingExecutor(chunk_policies=4, chunk_seeds=40)
    run(_cfg(), out, progress=False, executor=ex)
    assert ex.cells == 0
    report = write_report(out).read_text()
    assert "| 240 |" in report and "baseline: zeros" in report
    kept = verify_certificate(out / "certificate.json").columns
    assert (f"then only the 3 of least cost there (policies {', '.join(map(str, kept))}) on the "
            "rest") in report


def test_a_screened_runs_report_counts_every_rollout_flown(screened, tmp_path):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(screened[0], out)
    # carried rows: the record says only 7 were computed here, of 80 × 12 + 160 × 3 (the
    # certification rollouts, not the 240 × 3 of the screened matrix), 200 × 3 and 200
    (out / "timings.json").write_text(json.dumps(
        [{"finished": "2026-01-01T00:00:00Z", "seconds": {"cert costs": 1.0},
          "rollouts": {"cert costs": 7}}]))
    assert "computed 7 of the 2,240 rollouts in" in write_report(out).read_text()


def test_run_verify_refuses_columns_the_manifest_did_not_compute(screened, tmp_path):
    import shutil

    out = tmp_path / "copy"
    shutil.copytree(screened[0], out)
    path = out / "certificates" / "N240.json"
    d = json.loads(path.read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["costs/test.npy"]["inputs"]["columns"] = [0, 1, 2]
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PacplanError, match="columns are .* but manifest.json records "
                       r"costs/test.npy computed for columns \[0, 1, 2\]"):
        verify_certificate(path)
    assert d["columns"] != [0, 1, 2]


@pytest.mark.parametrize("screen, message", [
    ({"rows": 80, "keep": 12}, "keep 12 is not below policies.m 12"),
    ({"rows": 300, "keep": 3}, "rows 300 exceeds the largest certificate.n 240"),
    ({"rows": 0, "keep": 3}, "screen.rows"),
])
def test_bad_screens_are_refused_naming_the_field(screen, message):
    with pytest.raises(PacplanError, match=message):
        _cfg(screen=screen)


def test_screen_with_the_rep_solver_is_refused():
    with pytest.raises(PacplanError, match="screen needs solver gibbs"):
        _cfg(solver="rep")


def test_a_baseline_on_the_first_test_environments_only(tmp_path):
    """`envs` flies a costly baseline on the first test environments; its report row and
    paired comparison use exactly those, paired with the posterior's costs there."""
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["baselines"] = [{"name": "zeros"}, {"name": "zeros-short", "envs": 50}]
    ex = CountingExecutor(chunk_policies=4, chunk_seeds=40)
    run(parse_config(data), tmp_path, progress=False, executor=ex)
    assert ex.cells == 8 * 6 * 3 * 2 + 80 * 12 + 160 * 3 + 200 * 3 + 200 + 50
    short = np.load(tmp_path / "costs" / "baseline-zeros-short.npy")
    full = np.load(tmp_path / "costs" / "baseline-zeros.npy")
    np.testing.assert_array_equal(short, full[:50])
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["costs/baseline-zeros-short.npy"]["inputs"]["seeds"] == [20_000, 20_050]
    report = write_report(tmp_path).read_text()
    assert "baseline: zeros-short (first 50 test environments)" in report
    c = verify_certificate(tmp_path / "certificate.json")
    posterior = np.load(tmp_path / "costs" / "test.npy") @ c.matrix_p()
    d = posterior[:50] - short[:, 0]
    row = (f"| zeros-short (first 50) | {100 * short.mean():.2f} % "
           f"| {100 * posterior[:50].mean():.2f} % | {100 * d.mean():+.2f} pts [")
    assert row in report


def test_a_baseline_on_more_environments_than_the_test_set_is_refused():
    data = yaml.safe_load(yaml.safe_dump(BASE))
    data["baselines"] = [{"name": "zeros", "envs": 201}]
    with pytest.raises(PacplanError, match="baseline 'zeros': envs 201 exceeds the 200 seeds"):
        parse_config(data)


def test_plan_n_predicts_a_screened_run_as_it_certifies(screened):
    """plan-n on a screened run: the posterior on the policies the first K rows keep (KL
    against all 12), and rollouts counted as the run flies them (all 12 on its 80 screening
    rows, 3 beyond); the run has them all, so none more."""
    from pacplan.pacbayes.posterior import optimize_gibbs_columns
    from pacplan.pipeline.plan import plan_n

    out, _ = screened
    plan = plan_n(out, 240, rows=80)
    thetas = np.load(out / "policies.npy")
    first = ToyWorld(dim=6, shift=0.3).costs(thetas, np.arange(10_000, 10_080))
    kept = sorted(np.argsort(first.mean(axis=0), kind="stable")[:3].tolist())
    at_80 = optimize_gibbs_columns(first[:, kept], 12, 0.05, "best")
    assert plan.certified_at_rows == pytest.approx(at_80.value, rel=1e-12)
    assert plan.predicted_kl >= math.log(12 / 3) - 1e-12
    assert (plan.rollouts, plan.rollouts_more, plan.screened) == (80 * 12 + 160 * 3, 0, [80, 3])
    assert plan_n(out, 1000, rows=80).rollouts_more == 760 * 3


def test_plan_n_reads_a_certified_screened_runs_kept_rows_past_its_screen(screened):
    """Once certified, a screened run's kept policies have all 240 rows: plan-n starts from them
    by default, so at the run's own N it says the certificate the run holds."""
    from pacplan.pacbayes.posterior import optimize_gibbs_columns
    from pacplan.pipeline.plan import plan_n

    out, _ = screened
    plan = plan_n(out, 480)
    assert plan.rows == 240 and plan.rollouts_more == 240 * 3
    assert plan_n(out, 240).certified_at_rows == pytest.approx(
        verify_certificate(out / "certificates" / "N240.json").certified, rel=1e-9)
    rows = np.load(out / "costs" / "cert-screened.npy")[:200]
    assert plan_n(out, 480, rows=200).certified_at_rows == pytest.approx(
        optimize_gibbs_columns(rows, 12, 0.05, "best").value, rel=1e-12)
    with pytest.raises(PacplanError, match="--rows 241: the certification matrix has 240 rows"):
        plan_n(out, 480, rows=241)


def test_plan_n_reads_a_screened_run_still_computing_past_its_screen(tmp_path):
    """Stopped after its 6 screening chunks and 2 of the 4 beyond them: plan-n starts from the
    80 + 80 rows finished, the oracle the toy world's own costs of the kept policies."""
    from pacplan.pacbayes.posterior import optimize_gibbs_columns
    from pacplan.pipeline.plan import plan_n

    with pytest.raises(KeyboardInterrupt):
        run(_cfg(), tmp_path, progress=False,
            executor=StopAfter(8, chunk_policies=4, chunk_seeds=40))
    plan = plan_n(tmp_path, 240)
    thetas = np.load(tmp_path / "policies.npy")
    world = ToyWorld(dim=6, shift=0.3)
    first = world.costs(thetas, np.arange(10_000, 10_080))
    kept = sorted(np.argsort(first.mean(axis=0), kind="stable")[:3].tolist())
    rows = world.costs(thetas[kept], np.arange(10_000, 10_160))
    assert plan.rows == 160 and plan.rollouts_more == 80 * 3
    assert plan.certified_at_rows == pytest.approx(
        optimize_gibbs_columns(rows, 12, 0.05, "best").value, rel=1e-12)


def test_plan_n_prices_a_screened_run_by_all_its_certification_rollouts(screened, tmp_path):
    """The screening rows' and the kept policies' rollouts both count towards the rate; an entry
    whose cert-rest count exceeds what the run can fly (160 × 3) is left out, saying so."""
    import shutil

    from pacplan.pipeline.plan import plan_n

    out = Path(shutil.copytree(screened[0], tmp_path / "copy"))
    entry = {"finished": "2026-01-01T00:00:00Z",
             "seconds": {"cert costs": 9.6, "cert-rest costs": 2.4},
             "rollouts": {"cert costs": 960, "cert-rest costs": 480}}
    (out / "timings.json").write_text(json.dumps([entry]))
    assert plan_n(out, 480).seconds_per_rollout == pytest.approx(12.0 / 1440, rel=1e-12)
    bad = {**entry, "rollouts": {"cert costs": 960, "cert-rest costs": 481}}
    (out / "timings.json").write_text(json.dumps([entry, bad]))
    plan = plan_n(out, 480)
    assert plan.seconds_per_rollout == pytest.approx(12.0 / 1440, rel=1e-12)
    assert plan.timing_notes == ("timings.json entry 2 left out of the rate: cert-rest costs "
                                 "computed 481 rollouts, more than the whole certification "
                                 "matrix (480)",)
