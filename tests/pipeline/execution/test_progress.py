"""Progress written to a log file or pipe: plain lines at most every few minutes, with the rate
of this invocation and the time left at that rate (a Rich bar there prints nothing until the
step ends). The oracle is the arithmetic done by hand on a fake clock."""

from __future__ import annotations

import io

import pytest

from pacplan.pipeline.execution.progress import LineProgress, progress_bar

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_line_comes_every_interval_with_this_invocations_rate_and_time_left() -> None:
    clock, out = Clock(), io.StringIO()
    bar = LineProgress("cert costs", total=10, done=4, stream=out, every_s=300, clock=clock)
    clock.t += 100
    bar.advance()
    assert out.getvalue() == ""  # under the interval: nothing yet
    clock.t += 210
    bar.advance()
    # 2 units in 310 s here (the 4 resumed ones took no time): 0.387 a minute, and the 4 left
    # take 620 s at that rate
    assert out.getvalue() == "cert costs: 6/10 (60 %), 0.387 a minute, about 10 min left\n"
    clock.t += 10
    bar.advance()
    assert out.getvalue().count("\n") == 1  # the interval counts from the last line


def test_the_last_line_says_how_long_this_invocation_took() -> None:
    clock, out = Clock(), io.StringIO()
    bar = LineProgress("ES", total=3, stream=out, every_s=1e9, clock=clock)
    for note in ("ES cost 0.5", "ES cost 0.4", "ES cost 0.3"):
        clock.t += 2400
        bar.advance(note)
    bar.finish()
    assert out.getvalue() == "ES: 3/3 (100 %), 0.025 a minute, 3 in 2 h 0 min; ES cost 0.3\n"


def test_a_step_with_nothing_left_to_do_says_nothing_more() -> None:
    out = io.StringIO()
    LineProgress("test costs", total=5, done=5, stream=out).finish()
    assert out.getvalue() == ""


def test_off_a_terminal_the_display_is_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with progress_bar(True, "cert costs", total=2) as bar:
        assert isinstance(bar, LineProgress)  # pytest's captured stdout is not a terminal
        bar.advance()
        bar.advance()
    assert capsys.readouterr().out.startswith("cert costs: 2/2 (100 %), ")


def test_a_fast_rate_reads_as_a_whole_number() -> None:
    clock, out = Clock(), io.StringIO()
    bar = LineProgress("test costs", total=12000, stream=out, every_s=1e9, clock=clock)
    for _ in range(12000):
        bar.advance()
    clock.t += 2  # 12,000 units in 2 s: 360,000 a minute
    bar.finish()
    assert out.getvalue() == "test costs: 12000/12000 (100 %), 360,000 a minute, 12000 in 2.0 s\n"
