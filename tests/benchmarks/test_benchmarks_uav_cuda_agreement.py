"""benchmarks/uav_cuda_agreement.py: bad input is one line (exit 2) before any work; `compare`
counts the cells that differ and certifies each matrix as the run did (the run's own
certificate files are the oracle); `roll` writes the world's matrices for the run's seeds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import assert_refused, load_script, run_policy_family, run_script

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "uav_cuda_agreement.py"
UAV_RUN = ROOT / "results" / "uav"


@pytest.mark.parametrize("args,names", [
    (["roll", str(ROOT / "results" / "quadruped"), "OUT"], "'quadruped'"),
    (["roll", str(ROOT / "docs"), "OUT"], "no config.yaml"),
    (["roll", str(UAV_RUN), "OUT", "--chunk", "net_scale=3"], "net_scale=3"),
    (["roll", str(UAV_RUN), "OUT", "--cpu-seeds", "0"], "--cpu-seeds"),
    (["compare", str(UAV_RUN), "OUT"], "cert.npy"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, args: list[str], names: str) -> None:
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    assert_refused(run_script(SCRIPT, *args), names)
    assert not (tmp_path / "out").exists()


def test_roll_on_a_machine_without_cuda_is_one_line_and_exit_2(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert_refused(run_script(SCRIPT, "roll", str(UAV_RUN), str(tmp_path / "out")),
                   "sees no CUDA device")
    assert not (tmp_path / "out").exists()


def test_compare_counts_changed_cells_and_certifies_as_the_run_did(tmp_path: Path) -> None:
    bench = load_script(SCRIPT)
    cert = np.load(UAV_RUN / "costs" / "cert.npy")
    test = np.load(UAV_RUN / "costs" / "test.npy")
    flipped = cert.copy()
    flipped[[3, 3, 900], [0, 7, 49]] = 1.0 - flipped[[3, 3, 900], [0, 7, 49]]
    np.save(tmp_path / "cert.npy", flipped)
    np.save(tmp_path / "test.npy", test)
    out = bench.compare(UAV_RUN, tmp_path)
    assert out["cert"]["cells_differing"] == 3 and out["cert"]["rows_differing"] == 2
    assert out["cert"]["identical_share"] == pytest.approx(1 - 3 / cert.size)
    assert out["test"]["cells_differing"] == 0
    for n in (1000, 2000, 4000):
        recorded = json.loads((UAV_RUN / "certificates" / f"N{n}.json").read_text())
        assert out[f"n{n}"]["cpu"]["certified"] == pytest.approx(recorded["certified"], abs=1e-9)
        assert out[f"n{n}"]["cpu"]["test_cost"] == pytest.approx(recorded["test_cost"], abs=1e-9)
    for n in (1000, 4000):  # rows 3 and 900 changed: every N sees them
        assert out[f"n{n}"]["device"]["certified"] != out[f"n{n}"]["cpu"]["certified"]


def test_roll_writes_the_worlds_matrices_for_the_runs_seeds(tmp_path: Path) -> None:
    from pacplan.worlds.uav import UAVWorld

    run = tmp_path / "run"
    run.mkdir()
    config = yaml.safe_load((UAV_RUN / "config.yaml").read_text())
    family = run_policy_family(UAV_RUN)  # the run's policy family (the conv net's)
    config["world"]["options"] = {"simulator": "batched", "compile": False, **family}
    config["certificate"]["n"] = [4]
    config["seeds"]["test"] = [200_000, 200_003]
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    policies = np.load(UAV_RUN / "policies.npy")[:2]
    np.save(run / "policies.npy", policies)
    out = load_script(SCRIPT).roll(run, tmp_path / "out", "cpu", 2)
    world = UAVWorld(simulator="batched", compile=False, **family)
    cert = np.load(tmp_path / "out" / "cert.npy")
    np.testing.assert_array_equal(cert, world.costs(policies, np.arange(100_000, 100_004)))
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "test.npy"),
                                  world.costs(policies, np.arange(200_000, 200_003)))
    assert out["device"] == "cpu" and out["subset_rollouts"] == 4
    assert json.loads((tmp_path / "out" / "roll.json").read_text()) == out
