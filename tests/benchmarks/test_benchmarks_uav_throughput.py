"""benchmarks/uav_scale_throughput.py: bad input is refused in one line (exit 2) before any
work, and the roofline arithmetic (the timed runs themselves are the benchmark's, not a test's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import assert_refused, load_script, run_script

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "uav_scale_throughput.py"
ROOFLINE = SCRIPT.parent / "uav_throughput_roofline.py"  # its time split, a sibling module


@pytest.mark.parametrize("args,names", [
    (["--world", "quadruped"], "'quadruped'"),
    (["--prior", "no-such-prior"], "no-such-prior"),
    (["--seeds", "0"], "--seeds"),
    (["--baseline-ref", "no-such-ref-38"], "no-such-ref-38"),
    (["--conv-width", "3"], "--conv-width"),
    (["--conv-width", "8", "--conv-prior", "uav"], "policy_width 8 has 253361"),
    (["--conv-prior", "uav"], "--conv-prior needs --conv-width"),
    (["--chunk-seeds", "0"], "--chunk-seeds"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], names: str) -> None:
    assert_refused(run_script(SCRIPT, *args), names)


def test_fraction_of_roofline_is_the_achieved_rate_over_the_lower_ceiling() -> None:
    bench = load_script(ROOFLINE)
    roof = {
        "peak_one_thread": {"gflop_per_s": 40.0, "gb_per_s": 8.0, "threads": 1},
        "today": {"parts": {
            "ray_casting": {"gflop_per_s": 4.0, "flop_per_byte": 10.0},  # compute-bound: 40
            "collision_sweep": {"gflop_per_s": 0.4, "flop_per_byte": 0.5},  # memory: 4
            "python_dispatch": {"share": 0.1},
        }},
    }
    bench.fractions(roof)
    parts = roof["today"]["parts"]
    assert parts["ray_casting"]["fraction_of_roofline"] == pytest.approx(0.1)
    assert parts["collision_sweep"]["fraction_of_roofline"] == pytest.approx(0.1)
    assert "fraction_of_roofline" not in parts["python_dispatch"]


def test_decisions_are_counted_from_the_costs() -> None:
    """No collision: 12 primitives; a collision at check c: primitives up to the one holding c
    (20 checks a primitive, cost = 1 − c · 0.05 / 12)."""
    import numpy as np

    bench = load_script(SCRIPT)
    checks = np.array([1, 20, 21, 240])
    costs = np.concatenate([[0.0], 1 - checks * 0.05 / 12])
    assert bench.decisions(costs) == 12 + 1 + 1 + 2 + 12


def test_conv_pair_work_counts_every_weight_of_the_family() -> None:
    """Bytes read per pair: the image and the policy's weights, whose number is the family's."""
    from pacplan.worlds.uav.families import CONV_WIDTHS, policy_family

    bench = load_script(ROOFLINE)
    for width in CONV_WIDTHS:
        flops, moved = bench.conv_pair(width)
        assert moved == 4 * (2500 + policy_family("conv", width).dim)
        assert flops > 2 * policy_family("conv", width).dim  # conv taps reuse their weights
