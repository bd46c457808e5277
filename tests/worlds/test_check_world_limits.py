"""check_world never waits forever on a world, contains a world's sys.exit(), and a world that
prints cannot corrupt `check-world --json` (issue 25)."""

from __future__ import annotations

import json
import time

import pytest

from helpers import cli
from pacplan.worlds import base
from pacplan.worlds.check import check_world

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


@pytest.fixture(autouse=True)
def _misbehaving_worlds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Registered for each test only: other tests see the usual registry."""
    for name in ("hangs", "exits", "prints"):
        monkeypatch.setitem(base._REGISTRY, f"i25-{name}",
                            base.WorldEntry(f"misbehaving_worlds:{name.capitalize()}"))


def test_a_world_that_never_returns_fails_within_the_limit() -> None:
    start = time.monotonic()
    report = check_world("i25-hangs", timeout_s=0.5)
    assert time.monotonic() - start < 5
    assert not report.ok
    shape = next(r for r in report.results if r.name == "shape_dtype")
    assert shape.status == "failed" and "did not return within 0.5 s" in shape.detail
    assert all(r.status == "skipped" for r in report.results[report.results.index(shape) + 1:])


def test_a_world_that_calls_sys_exit_fails_its_check() -> None:
    report = check_world("i25-exits", timeout_s=None)  # no thread: raised in this one
    assert not report.ok and "SystemExit" in report.results[2].detail
    report = check_world("i25-exits")
    assert not report.ok and "SystemExit" in report.results[2].detail


@pytest.mark.parametrize("timeout_s", [0, -1, float("nan"), float("inf"), "1"])
def test_the_limit_must_be_a_positive_number(timeout_s) -> None:  # type: ignore[no-untyped-def]
    from pacplan.errors import PacplanError

    with pytest.raises(PacplanError, match="timeout_s"):
        check_world("toy", timeout_s=timeout_s)


def test_a_world_that_prints_does_not_corrupt_json(capsys) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli(["check-world", "i25-prints", "--json", "--seeds", "2",
                          "--policies", "2"], capsys)
    report = json.loads(out)  # stdout is exactly one JSON object
    assert report["world"] == "i25-prints" and "hello from the world" in err
    assert code in (0, 2)
