"""The UAV's conv policy family (`policy: conv`) on a GPU: the CPU's costs but for rare
near-ties, and chunk sizes that change no cost. Skipped without CUDA (none here, nor in CI);
run where a GPU is. Width 2, random policies at the scale a prior's draws have."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")

OPTIONS = {"simulator": "batched", "compile": False, "policy": "conv", "policy_width": 2}
SEEDS = np.arange(100_000, 100_100)


def _costs(**options: object) -> np.ndarray:
    from pacplan.worlds.uav import UAVWorld

    world = UAVWorld(**OPTIONS, **options)
    thetas = np.random.default_rng(0).normal(0, 0.1, (8, world.policy_dim())).astype(np.float32)
    return world.costs(thetas, SEEDS)


def test_cuda_conv_costs_are_the_cpus_but_for_rare_near_ties() -> None:
    cpu, gpu = _costs(device="cpu"), _costs(device="cuda")
    assert gpu.shape == cpu.shape == (SEEDS.size, 8)
    assert np.mean(cpu == gpu) >= 0.99
    assert abs(float(cpu.mean() - gpu.mean())) < 0.01


def test_chunk_sizes_change_no_cuda_conv_cost() -> None:
    np.testing.assert_array_equal(_costs(device="cuda"),
                                  _costs(device="cuda", env_chunk=64, policy_chunk=3))
