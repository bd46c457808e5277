"""The run pipeline on the toy world: end to end, resumable after kill -9, tamper-evident."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import CountingExecutor
from pacplan.config import load_config, parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.provenance import verify_certificate as verify
from pacplan.report.document import write_report

BASE = {
    "name": "toy-pipeline",
    "world": {"name": "toy", "options": {"dim": 6, "shift": 0.3}},
    "seeds": {"prior": [0, 300], "cert": [10_000, 10_240], "test": [20_000, 20_200]},
    "es": {"iterations": 8, "envs_per_iter": 6, "pairs_per_env": 3, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 40},
    "policies": {"m": 12, "seed": 3},
    "certificate": {"n": [120, 240], "delta": 0.05},
    "baselines": [{"name": "zeros"}],
    "report": {"trajectories": 0},
}


def _cfg(**changes):
    data = yaml.safe_load(yaml.safe_dump(BASE))
    for key, value in changes.items():
        data[key] = value
    return parse_config(data)


def test_end_to_end_certificates_verify_and_report(tmp_path: Path):
    result = run(_cfg(), tmp_path, progress=False)
    assert sorted(result.certificates) == [120, 240]
    c = verify(tmp_path / "certificate.json")
    assert c.n == 240 and c.m == 12 and c.test_n == 200
    assert c.provenance["seeds"] == {"prior": [0, 300], "cert": [10_000, 10_240],
                                     "test": [20_000, 20_200]}
    assert verify(tmp_path / "certificates" / "N120.json").provenance["seeds"]["cert"] == [
        10_000, 10_120]
    # policies are stored, drawn from the stored prior
    thetas = np.load(tmp_path / "policies.npy", allow_pickle=False)
    assert thetas.shape == (12, 6) and thetas.dtype == np.float32
    # the cert matrix is the world's costs for those policies on those seeds
    from pacplan.worlds.toy import ToyWorld

    expected = ToyWorld(dim=6, shift=0.3).costs(thetas, np.arange(10_000, 10_240))
    np.testing.assert_array_equal(np.load(tmp_path / "costs" / "cert.npy"), expected)
    report = write_report(tmp_path).read_text()
    assert "| 120 |" in report and "| 240 |" in report and "baseline: zeros" in report
    # the paired row: posterior's expected cost minus the baseline's, environment by environment
    base = np.load(tmp_path / "costs" / "baseline-zeros.npy")[:, 0]
    d = np.load(tmp_path / "costs" / "test.npy") @ np.asarray(c.p) - base
    assert f"| zeros | {100 * base.mean():.2f} %" in report
    assert f"| {100 * d.mean():+.2f} pts [" in report
    assert (tmp_path / "figures" / "bounds_vs_n.png").stat().st_size > 1000


def test_second_run_recomputes_nothing(tmp_path: Path):
    run(_cfg(), tmp_path, progress=False)
    ex = CountingExecutor(chunk_policies=4, chunk_seeds=40)
    run(_cfg(), tmp_path, progress=False, executor=ex)
    assert ex.computed == 0


@pytest.mark.kernel_free  # a kill and a resume on one machine
def test_kill_9_during_cost_matrix_resumes_without_recomputing(tmp_path: Path):
    """SIGKILL `pacplan run` mid-matrix; the rerun computes only the unfinished chunks and the
    result is bit-identical to an uninterrupted run."""
    slow = _cfg(world={"name": "toy", "options": {"dim": 6, "shift": 0.3, "work": 400}})
    cfg_file = tmp_path / "slow.yaml"
    from pacplan.config import config_to_dict

    cfg_file.write_text(yaml.safe_dump(config_to_dict(slow)))
    run_dir = tmp_path / "run"
    chunks = run_dir / "costs" / "cert.chunks"
    proc = subprocess.Popen([sys.executable, "-m", "pacplan.cli", "run", str(cfg_file), "--out",
                             str(run_dir), "--quiet"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and len(list(chunks.glob("*.npy"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = list(chunks.glob("*.npy"))
    assert 3 <= len(finished) < 6 * 3, "kill should land inside the cert matrix step"

    ex = CountingExecutor(chunk_policies=4, chunk_seeds=40)
    run(slow, run_dir, progress=False, executor=ex)
    total_cert, total_test, total_base = 6 * 3, 5 * 3, 5
    assert ex.computed == total_cert - len(finished) + total_test + total_base

    fresh = tmp_path / "fresh"
    run(slow, fresh, progress=False)
    for name in ("policies.npy", "costs/cert.npy", "costs/test.npy"):
        np.testing.assert_array_equal(np.load(run_dir / name), np.load(fresh / name))


def test_kept_chunks_are_used_as_they_are(tmp_path: Path):
    """A chunk already on disk is taken as it is (here: sentinel values), not recomputed."""
    cfg = _cfg()
    from pacplan.pipeline.execution.chunks import ChunkStore

    # finish the run once, then re-create a partial chunk folder for a new role by hand
    run(cfg, tmp_path, progress=False)
    (tmp_path / "costs" / "test.npy").unlink()
    import json

    m = json.loads((tmp_path / "manifest.json").read_text())
    inputs = m.pop("costs/test.npy")["inputs"]
    (tmp_path / "manifest.json").write_text(json.dumps(m))
    store = ChunkStore(tmp_path / "costs" / "test.chunks", inputs)
    block = np.load(tmp_path / "costs" / "cert.npy")[:40, :4] * 0 + 0.5  # sentinel values
    store.save((0, 0), block)
    ex = CountingExecutor(chunk_policies=4, chunk_seeds=40)
    run(cfg, tmp_path, progress=False, executor=ex)
    assert ex.computed == 5 * 3 - 1
    test = np.load(tmp_path / "costs" / "test.npy")
    assert np.all(test[:40, :4] == 0.5), "the kept chunk was used, not recomputed"


@pytest.mark.parametrize("artifact", ["policies.npy", "costs/cert.npy", "prior.safetensors"])
def test_changed_artifact_is_named(tmp_path: Path, artifact: str):
    run(_cfg(), tmp_path, progress=False)
    path = tmp_path / artifact
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(PacplanError, match=artifact.replace(".", r"\.") + ".*changed"):
        run(_cfg(), tmp_path, progress=False)


def test_different_config_in_same_directory_is_refused(tmp_path: Path):
    run(_cfg(), tmp_path, progress=False)
    with pytest.raises(PacplanError, match=r"different config.*policies"):
        run(_cfg(policies={"m": 13, "seed": 3}), tmp_path, progress=False)
    # the executor never changes a result, so it may differ
    run(_cfg(executor={"kind": "serial", "chunk_policies": 4, "chunk_seeds": 40,
                       "workers": 1}), tmp_path, progress=False)
    # and the frozen config then says how this invocation ran (its text is kept only when it
    # says the same)
    assert load_config(tmp_path / "config.yaml").executor.workers == 1


def test_given_prior_is_used_and_checked(tmp_path: Path):
    first = tmp_path / "a"
    run(_cfg(), first, progress=False)
    second = tmp_path / "b"
    ex = CountingExecutor(chunk_policies=4, chunk_seeds=40)
    run(_cfg(), second, prior_file=first / "prior.safetensors", progress=False, executor=ex)
    assert not (second / "metrics.jsonl").exists(), "no ES training with a given prior"
    # the frozen config names the prior the run certified, not the config's own
    assert load_config(second / "config.yaml").prior == str((first / "prior.safetensors").resolve())
    np.testing.assert_array_equal(np.load(first / "policies.npy"),
                                  np.load(second / "policies.npy"))
    with pytest.raises(PacplanError, match="holds a different prior"):
        run(_cfg(), first, prior_file=second / "policies.npy", progress=False)
    # The same prior read from another place (say, another checkout) resumes the run.
    copy = tmp_path / "elsewhere.safetensors"
    copy.write_bytes((first / "prior.safetensors").read_bytes())
    run(_cfg(prior=str(copy)), second, progress=False, executor=ex)
    assert ex.computed == 5 * 3 + 6 * 3 + 5, "nothing recomputed after the first run"
    # and its frozen config now names the file where it was read (the old place may be gone)
    assert load_config(second / "config.yaml").prior == str(copy.resolve())
    with pytest.raises(PacplanError, match="prior file not found"):
        run(_cfg(), tmp_path / "c", prior_file=tmp_path / "nope.safetensors", progress=False)
    with pytest.raises(PacplanError, match="weights"):
        run(_cfg(world={"name": "toy", "options": {"dim": 7}}), tmp_path / "d",
            prior_file=first / "prior.safetensors", progress=False)


def test_cli_run_and_report(tmp_path: Path):
    from pacplan.config import config_to_dict

    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(yaml.safe_dump(config_to_dict(_cfg())))
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, "-m", "pacplan.cli", "run", str(cfg_file), "--out",
                           str(tmp_path / "r"), "--quiet"], capture_output=True, text=True,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert "certified" in proc.stdout and (tmp_path / "r" / "report.md").is_file()
    proc = subprocess.run([sys.executable, "-m", "pacplan.cli", "run", str(tmp_path / "x.yaml")],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "config file not found" in proc.stderr


def test_baseline_from_a_weights_file_and_stale_chunks(tmp_path: Path):
    """A baseline flies the policy of its weights file; a changed file recomputes the row and
    discards chunks a killed run left for the old file."""
    from pacplan.pipeline.execution.chunks import ChunkStore
    from pacplan.worlds.toy import ToyWorld

    weights = tmp_path / "w.npy"
    np.save(weights, np.full(6, 0.3, dtype=np.float32))
    cfg = _cfg(baselines=[{"name": "fixed", "weights": str(weights)}])
    run_dir = tmp_path / "run"
    run(cfg, run_dir, progress=False)
    row = np.load(run_dir / "costs" / "baseline-fixed.npy")
    expected = ToyWorld(dim=6, shift=0.3).costs(np.full((1, 6), 0.3, np.float32),
                                                np.arange(20_000, 20_200))
    np.testing.assert_array_equal(row, expected)
    # Same file content at another path: nothing to redo (a run stays resumable elsewhere).
    moved = tmp_path / "moved.npy"
    moved.write_bytes(weights.read_bytes())
    ex = CountingExecutor(chunk_policies=4, chunk_seeds=40)
    run(_cfg(baselines=[{"name": "fixed", "weights": str(moved)}]), run_dir, progress=False,
        executor=ex)
    assert ex.computed == 0
    # New content in the same directory is refused, naming what changed.
    np.save(weights, np.zeros(6, dtype=np.float32))
    with pytest.raises(PacplanError, match="different weights_sha256"):
        run(cfg, run_dir, progress=False)
    # A chunk that a killed run left for other weights is discarded, not reused.
    fresh = tmp_path / "fresh"
    old_inputs = {"world": {"name": "toy", "options": {"dim": 6, "shift": 0.3}},
                  "seeds": [20_000, 20_200], "weights_sha256": "old"}
    ChunkStore(fresh / "costs" / "baseline-fixed.chunks", old_inputs).save(
        (0, 0), np.full((40, 1), 0.5))
    run(cfg, fresh, progress=False)
    expected = ToyWorld(dim=6, shift=0.3).costs(np.zeros((1, 6), np.float32),
                                                np.arange(20_000, 20_200))
    np.testing.assert_array_equal(np.load(fresh / "costs" / "baseline-fixed.npy"), expected)
    assert not np.array_equal(expected, row)


def test_paired_comparison_against_exact_cases():
    from pacplan.report.tables import paired_comparison

    rng = np.random.default_rng(0)
    test = rng.uniform(0, 1, (50, 3))
    p = np.array([0.2, 0.3, 0.5])
    # the posterior's own per-environment costs, summed in the same fixed order (not BLAS)
    same = paired_comparison(p, test, {"same": (test * p).sum(axis=1)[:, None]})
    assert "| same | " in same and "+0.00 pts [+0.00, +0.00] | 0 / 0 / 50 |" in same
    # summed in another order (BLAS, another CPU) it is still a tie on every environment
    other = (test[:, ::-1] * p[::-1]).sum(axis=1)[:, None] + 1e-15
    assert "| 0 / 0 / 50 |" in paired_comparison(p, test, {"other": other})
    assert "| 0 / 50 / 0 |" in paired_comparison(p, test, {"below": other - 1e-9})
    worst = paired_comparison(p, np.zeros((50, 3)), {"ones": np.ones((50, 1))})
    assert "-100.00 pts [-100.00, -100.00] | 50 / 0 / 0 |" in worst
    # a mixed case: the interval contains the mean and lies within the range of d
    base = rng.uniform(0, 1, (50, 1))
    row = paired_comparison(p, test, {"b": base}).splitlines()[-1]
    d = 100 * (test @ p - base[:, 0])
    mean, lo, hi = (float(x) for x in
                    row.split("|")[4].replace("pts", "").replace("[", "").replace("]", "")
                    .replace(",", "").split())
    assert mean == pytest.approx(d.mean(), abs=0.006) and lo <= mean <= hi
    assert d.min() <= lo and hi <= d.max()
