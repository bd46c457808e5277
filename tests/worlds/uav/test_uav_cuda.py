"""The UAV's batched simulator on a GPU: the CPU's costs but for rare near-ties, and chunk sizes
that change no cost, for both policy families (the shipped conv net of results/uav and the
paper's net of results/uav-paper-net). Skipped without CUDA (CI has none); run where a GPU is.
Measured on an H200 (benchmarks/uav_cuda_agreement.py): 99.97 % of the paper net's 450,000
cells identical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers import run_policy_family

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

RESULTS = Path(__file__).resolve().parents[3] / "results"
RUNS = ["uav", "uav-paper-net"]
SEEDS = np.arange(100_000, 100_200)  # the runs' first certification seeds


def _costs(run: str, **options: object) -> np.ndarray:
    """Ten of the run's policies flown in its policy family on the seeds."""
    from pacplan.worlds.uav import UAVWorld

    family = run_policy_family(RESULTS / run)
    thetas = np.load(RESULTS / run / "policies.npy", allow_pickle=False)[:10]
    return UAVWorld(simulator="batched", compile=False, **family, **options).costs(thetas, SEEDS)


@pytest.mark.parametrize("run", RUNS)
def test_cuda_costs_are_the_cpus_but_for_rare_near_ties(run: str) -> None:
    cpu, gpu = _costs(run, device="cpu"), _costs(run, device="cuda")
    assert gpu.shape == cpu.shape == (SEEDS.size, 10)
    assert np.mean(cpu == gpu) >= 0.995  # a near-tie flips by the last float bit, rarely
    assert abs(float(cpu.mean() - gpu.mean())) < 0.005


@pytest.mark.parametrize("run", RUNS)
def test_chunk_sizes_change_no_cuda_cost(run: str) -> None:
    np.testing.assert_array_equal(_costs(run, device="cuda"),
                                  _costs(run, device="cuda", env_chunk=128, render_chunk=256))
