"""`plan-n` prices rollouts from timings.json, a file for people that may be damaged or edited.
An implausible entry is left out of the rate with a line saying which and why, and the
prediction goes on (the certificate never depended on it): `rollouts: 1e308` printed "inf
rollouts/s", `seconds: 0` for rollouts computed divided by zero."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from helpers import SMALL_TOY_RUN, cli
from pacplan.config import parse_config
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.plan import plan_n

WHOLE = 60 * 6  # the toy run's whole certification matrix: N = 60 rows × m = 6 policies
MORE = (1000 - 60) * 6  # rollouts beyond the run's rows, for --target-n 1000
GOOD = {"seconds": {"cert costs": 3.6}, "rollouts": {"cert costs": 360}}  # 100 rollouts/s


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("plan") / "run"
    run(parse_config(json.loads(json.dumps(SMALL_TOY_RUN))), out, progress=False)
    return out


def _entry(seconds: Any, rollouts: Any) -> dict[str, Any]:
    return {"seconds": {"prior": 1.0, "cert costs": seconds},
            "rollouts": {"cert costs": rollouts, "test costs": 10}}


BAD = [  # (seconds, rollouts, words of the note)
    (2.0, 1e308, "1e+308 rollouts, more than the whole certification matrix (360)"),
    (2.0, WHOLE + 1, "361 rollouts, more than the whole"),
    (2.0, 2.5, "2.5 rollouts, not a whole number"),
    (2.0, -5, "-5 rollouts, not a whole number ≥ 0"),
    (2.0, "10", "'10' rollouts"),
    (2.0, True, "True rollouts"),
    (-1.0, 10, "took -1.0 s, not a finite number ≥ 0"),
    (math.inf, 10, "took inf s"),
    (math.nan, 10, "took nan s"),
    (0.0, 10, "computed 10 rollouts in 0 s"),
]


@pytest.mark.parametrize(("seconds", "rollouts", "words"), BAD)
def test_an_implausible_entry_is_left_out_and_named(toy: Path, seconds: Any, rollouts: Any,
                                                    words: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (toy / "timings.json").write_text(json.dumps([GOOD, _entry(seconds, rollouts)]))
    plan = plan_n(toy, 1000)
    assert plan.seconds_per_rollout == pytest.approx(0.01, rel=1e-12)
    assert plan.predicted_seconds == pytest.approx(MORE * 0.01, rel=1e-12)
    (note,) = plan.timing_notes
    assert note.startswith("timings.json entry 2 left out of the rate: ") and words in note
    rc, out, _ = cli(["plan-n", str(toy), "--target-n", "1000"], capsys)
    assert rc == 0 and "100 rollouts/s" in out and words in " ".join(out.split())
    (toy / "timings.json").write_text(json.dumps([_entry(seconds, rollouts)]))  # it alone
    alone = plan_n(toy, 1000)
    assert alone.seconds_per_rollout is None and alone.predicted_seconds is None
    assert alone.predicted_certified == plan.predicted_certified
    rc, out, _ = cli(["plan-n", str(toy), "--target-n", "1000"], capsys)
    assert rc == 0 and "rollouts/s" not in out and "at this run" not in out


def test_a_rate_beyond_float64_is_no_rate(toy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each number plausible, the rate is not: 1e308 s over 10 rollouts overflows the time of
    the rollouts to come; 5e-324 s over 10 underflows the rate to 0 s (∞ rollouts/s)."""
    for seconds, words in ((1e308, "overflow float64"), (5e-324, "outside float64's range")):
        (toy / "timings.json").write_text(json.dumps([_entry(seconds, 10)]))
        plan = plan_n(toy, 1000)
        assert plan.seconds_per_rollout is None and plan.predicted_seconds is None
        assert len(plan.timing_notes) == 1 and words in plan.timing_notes[0]
        rc, out, _ = cli(["plan-n", str(toy), "--target-n", "1000", "--json"], capsys)
        assert rc == 0 and json.loads(out)["timing_notes"] == list(plan.timing_notes)
        assert json.loads(out)["seconds_per_rollout"] is None


def test_plausible_entries_give_the_rate_without_a_note(toy: Path) -> None:
    kept = _entry(0.0, 0)  # a resumed invocation that kept every chunk: 0 rollouts in 0 s
    (toy / "timings.json").write_text(json.dumps([GOOD, kept, _entry(1.2, 60)]))
    plan = plan_n(toy, 1000)
    assert plan.seconds_per_rollout == pytest.approx(4.8 / 420, rel=1e-12)
    assert plan.timing_notes == ()


def test_a_slow_worlds_rate_keeps_its_figures(toy: Path, capsys: pytest.CaptureFixture[str]
                                              ) -> None:
    """A PyBullet stage runs under 2 rollouts/s: its rate was printed as "2 rollouts/s", 13 %
    off; it keeps three figures, and the time left reads as the progress lines say it."""
    slow = {"seconds": {"cert costs": 360 / 1.76}, "rollouts": {"cert costs": 360}}
    (toy / "timings.json").write_text(json.dumps([slow]))
    rc, out, _ = cli(["plan-n", str(toy), "--target-n", "1000"], capsys)
    text = " ".join(out.split())
    assert rc == 0 and "at this run's 1.76 rollouts/s" in text
    assert f"about {MORE / 1.76 / 60:.0f} min" in text  # 5640 rollouts: 53 min
