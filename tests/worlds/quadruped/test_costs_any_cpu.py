"""The quadruped's costs are the same bits on every CPU (docs/reproducibility.md).

Oracle: results/quadruped's stored test matrix, recomputed here with NumPy's float64 sin, tanh,
exp, … one ulp off in half their results (tests/other_libm.py, what an AVX-512 CPU's kernels
do). With `np.sin` in the gait, 95 of 150 such cells moved (by up to 2e-7): an AVX-512 machine
could not have resumed or rechecked the shipped run bit for bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import other_libm
from pacplan.worlds import make_world

RUN = Path(__file__).resolve().parents[3] / "results" / "quadruped"


def test_costs_do_not_depend_on_numpys_transcendental_kernels() -> None:
    world = make_world("quadruped", robot="derpy", physics="mujoco", max_slope_deg=23.3)
    policies = np.load(RUN / "policies.npy", allow_pickle=False)
    stored = np.load(RUN / "costs" / "test.npy", allow_pickle=False)
    columns, seeds = [49, 8], np.arange(200_000, 200_006)
    with other_libm.active():
        costs = world.costs(policies[columns].astype(np.float32), seeds)
    assert costs.tobytes() == stored[: seeds.size][:, columns].tobytes()


def test_the_shipped_pybullet_paper_code_run_recomputes_bit_for_bit() -> None:
    """results/quadruped-paper-code-n1000-twin (the paper's experiment in PyBullet) was computed
    over six sessions and resumed by the full run: four of its stored cells, two of them
    failures, recomputed with the other libm are the same bits."""
    run = RUN.parent / "quadruped-paper-code-n1000-twin"
    world = make_world("quadruped", variant="paper-code", physics="bullet")
    policies = np.load(run / "policies.npy", allow_pickle=False)
    stored = np.load(run / "costs" / "cert.npy", allow_pickle=False)
    columns, seeds = [7, 3], np.array([100_001, 100_002])
    with other_libm.active():
        costs = world.costs(policies[columns].astype(np.float32), seeds)
    assert (costs > 0).any()
    assert costs.tobytes() == stored[1:3][:, columns].tobytes()
