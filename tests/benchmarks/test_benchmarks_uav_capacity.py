"""benchmarks/uav_student_capacity.py: bad input refused in one line (exit 2) before any work,
and on a tiny problem every family is fitted on the same teacher states, the lattices solved
once (the shared files checked by each family's own ledger)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import assert_refused, load_script, run_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "uav_student_capacity.py"


@pytest.mark.parametrize("args,names", [
    (["--families", "paper,mlp"], "'mlp'"),
    (["--families", "conv3"], "policy_width must be one of"),
    (["--families", "paper,paper"], "once"),
    (["--eval-envs", "1"], "--eval-envs"),
    (["--rounds", "-1"], "--rounds"),
    (["--time-envs", "0"], "--time-envs"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], names: str, tmp_path: Path) -> None:
    assert_refused(run_script(SCRIPT, *args, "--out", str(tmp_path / "o")), names)
    assert not (tmp_path / "o").exists()


@pytest.mark.kernel_free  # same-machine agreement: the families' shared labels
def test_families_share_the_labels_and_the_lattices(tmp_path: Path) -> None:
    import numpy as np

    from pacplan.worlds.uav.families import policy_family

    bench = load_script(SCRIPT)
    out = bench.main(["--families", "paper,conv1", "--envs", "4", "--eval-envs", "4",
                      "--epochs", "1", "--workers", "1", "--time-policies", "3",
                      "--time-envs", "2", "--out", str(tmp_path)])
    rows = {r["family"]: r for r in out["families"]}
    assert rows["paper"]["weights"] == 13_943
    assert rows["conv1"]["weights"] == policy_family("conv", 1).dim
    assert rows["paper"]["rollout_time_ratio"] == 1.0
    for r in rows.values():
        assert 0 <= r["heldout_cost"] <= 1 and r["rollout_cpu_ms"] > 0
    states = [np.load(tmp_path / f / "distill" / "states-0.npy") for f in ("paper", "conv1")]
    assert np.array_equal(*states)  # round 0's states do not depend on the student
    lat = [(tmp_path / f / "distill" / "lattice" / "0.npz").read_bytes()
           for f in ("paper", "conv1")]
    assert lat[0] == lat[1]
    again = bench.main(["--families", "paper,conv1", "--envs", "4", "--eval-envs", "4",
                        "--epochs", "1", "--workers", "1", "--time-policies", "3",
                      "--time-envs", "2", "--out", str(tmp_path)])
    assert [r["heldout_cost"] for r in again["families"]] == [r["heldout_cost"]
                                                              for r in out["families"]]
