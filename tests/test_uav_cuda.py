"""The UAV's batched simulator on a GPU: the CPU's costs but for rare near-ties, and chunk sizes
that change no cost. Skipped without CUDA (CI has none); run where a GPU is. Measured on an H200
(benchmarks/uav_cuda_agreement.py): 99.97 % of results/uav's 450,000 cells identical."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

POLICIES = Path(__file__).resolve().parents[1] / "results" / "uav" / "policies.npy"
SEEDS = np.arange(100_000, 100_200)  # results/uav's first certification seeds


def _costs(**options: object) -> np.ndarray:
    from pacplan.worlds.uav import UAVWorld

    thetas = np.load(POLICIES, allow_pickle=False)[:10]
    return UAVWorld(simulator="batched", compile=False, **options).costs(thetas, SEEDS)


def test_cuda_costs_are_the_cpus_but_for_rare_near_ties() -> None:
    cpu, gpu = _costs(device="cpu"), _costs(device="cuda")
    assert gpu.shape == cpu.shape == (SEEDS.size, 10)
    assert np.mean(cpu == gpu) >= 0.995  # a near-tie flips by the last float bit, rarely
    assert abs(float(cpu.mean() - gpu.mean())) < 0.005


def test_chunk_sizes_change_no_cuda_cost() -> None:
    np.testing.assert_array_equal(_costs(device="cuda"),
                                  _costs(device="cuda", env_chunk=128, render_chunk=256))
