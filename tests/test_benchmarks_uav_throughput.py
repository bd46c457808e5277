"""benchmarks/uav_scale_throughput.py: bad input is refused in one line (exit 2) before any
work, and the roofline arithmetic (the timed runs themselves are the benchmark's, not a test's)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import assert_refused, load_script, run_script

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "uav_scale_throughput.py"


@pytest.mark.parametrize("args,names", [
    (["--world", "quadruped"], "'quadruped'"),
    (["--prior", "no-such-prior"], "no-such-prior"),
    (["--seeds", "0"], "--seeds"),
    (["--baseline-ref", "no-such-ref-38"], "no-such-ref-38"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], names: str) -> None:
    assert_refused(run_script(SCRIPT, *args), names)


def test_fraction_of_roofline_is_the_achieved_rate_over_the_lower_ceiling() -> None:
    bench = load_script(SCRIPT)
    roof = {
        "peak_one_thread": {"gflop_per_s": 40.0, "gb_per_s": 8.0, "threads": 1},
        "today": {"parts": {
            "ray_casting": {"gflop_per_s": 4.0, "flop_per_byte": 10.0},  # compute-bound: 40
            "collision_sweep": {"gflop_per_s": 0.4, "flop_per_byte": 0.5},  # memory: 4
            "python_dispatch": {"share": 0.1},
        }},
    }
    bench._fractions(roof)
    parts = roof["today"]["parts"]
    assert parts["ray_casting"]["fraction_of_roofline"] == pytest.approx(0.1)
    assert parts["collision_sweep"]["fraction_of_roofline"] == pytest.approx(0.1)
    assert "fraction_of_roofline" not in parts["python_dispatch"]
