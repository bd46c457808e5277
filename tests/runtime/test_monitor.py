"""`CertificateMonitor` and `pacplan monitor`: false alarms ≤ alpha in the worst case (Monte
Carlo), the 12 % → 20 % goals, the statistic against an independent formula, the lower bound
against brute force, bad costs refused with their line, the planner's own monitor."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from helpers import cli
from pacplan.runtime import CertificateMonitor, Planner, PlannerError
from pacplan.runtime.monitor import bet_fractions, log_evidence

ROOT = Path(__file__).resolve().parents[2]
C = 0.12


def bernoulli(mean: float, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    return (rng.random(shape) < mean).astype(np.float64)


def uav_like(mean: float, shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """0 with probability 1 − 2·mean, else uniform on [0, 1] (the UAV planner's costs are 0 in
    82 % of episodes, spread over (0, 1) otherwise)."""
    return np.where(rng.random(shape) < 2 * mean, rng.random(shape), 0.0)


def alarm_rate(x: np.ndarray, alpha: float) -> float:
    return float((log_evidence(x, C) >= math.log(1 / alpha)).any(axis=1).mean())


def _false_alarms(family, streams: int, episodes: int, seed: int) -> None:
    """At mean exactly c, the fraction of streams that ever alarm is ≤ alpha + 3 MC s.e."""
    x = family(C, (streams, episodes), np.random.default_rng(seed))
    assert abs(x.mean() - C) < 0.01
    for alpha in (0.01, 0.05, 0.2):
        se = math.sqrt(alpha * (1 - alpha) / streams)
        rate = alarm_rate(x, alpha)
        assert rate <= alpha + 3 * se, (family.__name__, alpha, rate)


@pytest.mark.parametrize("family", [bernoulli, uav_like])
def test_false_alarms_at_most_alpha_in_the_worst_case(family) -> None:
    _false_alarms(family, 1000, 1000, seed=1)


@pytest.mark.slow
@pytest.mark.parametrize("family", [bernoulli, uav_like])
def test_false_alarms_at_most_alpha_over_1000_streams_of_5000_episodes(family) -> None:
    _false_alarms(family, 1000, 5000, seed=2)


def test_a_test_that_ignored_its_looks_would_fail_the_same_check() -> None:
    """The check above can fail: a naive CLT z-test (mean above c by 2.33 s.e., valid for one
    look) checked after every episode alarms far more often than alpha = 0.01 at mean c."""
    x = bernoulli(C, (1000, 1000), np.random.default_rng(3))
    n = np.arange(1, x.shape[1] + 1)
    z = (np.cumsum(x, axis=1) / n - C) / np.sqrt(C * (1 - C) / n)
    rate = float((z[:, 20:] > 2.326).any(axis=1).mean())
    assert rate > 0.01 + 3 * math.sqrt(0.01 * 0.99 / 1000)


@pytest.mark.parametrize(("family", "goal"), [(bernoulli, 200), (uav_like, 130)])
def test_a_12_to_20_percent_shift_is_flagged_within_the_goal(family, goal: int) -> None:
    """Median alarm episode at alpha = 0.01 (benchmarks/monitor_detection.py: 171 and 101 on
    2000 streams); every stream alarms within 1500 episodes."""
    x = family(0.20, (600, 1500), np.random.default_rng(4))
    hit = log_evidence(x, C) >= math.log(100)
    assert hit.any(axis=1).all()
    assert np.median(hit.argmax(axis=1) + 1) <= goal


def test_a_benign_shift_raises_no_alarm() -> None:
    x = bernoulli(0.08, (300, 3000), np.random.default_rng(5))
    assert alarm_rate(x, 0.01) == 0.0


def test_statistic_is_the_mixture_of_bets_computed_independently() -> None:
    """log Σ_k w_k Π_i (1 + (u_k / c)(x_i − c)) in plain Python floats."""
    x = [0.0, 0.3, 1.0, 0.0, 0.0, 0.55, 1.0, 0.0]
    u, logw = bet_fractions()
    assert math.isclose(float(np.exp(logw).sum()), 1.0, rel_tol=1e-12)
    direct = math.log(sum(math.exp(lw) * math.prod(1 + (uk / C) * (xi - C) for xi in x)
                          for uk, lw in zip(u.tolist(), logw.tolist())))
    monitor = CertificateMonitor(C, 0.05)
    for xi in x:
        monitor.update(xi)
    assert math.isclose(monitor.log_e_value, direct, rel_tol=1e-12, abs_tol=1e-12)
    assert math.isclose(float(log_evidence(np.array(x), C)[-1]), direct, rel_tol=1e-12,
                        abs_tol=1e-12)


def test_monitor_alarms_on_the_episode_of_the_statistic_and_the_alarm_stays() -> None:
    rng = np.random.default_rng(6)
    x = np.concatenate([bernoulli(0.3, (1, 200), rng)[0], np.zeros(300)])
    first = int(np.argmax(log_evidence(x, C) >= math.log(100))) + 1
    monitor = CertificateMonitor(C, 0.01)
    raised = [monitor.update(v) for v in x]
    assert raised.index(True) + 1 == first == monitor.alarm_episode
    assert all(raised[first - 1:]) and monitor.alarm  # zeros afterwards do not lower it
    assert monitor.episodes == 500
    assert log_evidence(x, C)[-1] < math.log(100)  # the statistic itself has fallen back
    state = monitor.state()
    assert json.loads(json.dumps(state)) == state
    assert state["alarm_episode"] == first and state["episodes"] == 500


def test_lower_bound_is_the_running_max_of_the_rejected_means_by_brute_force() -> None:
    """L_t = max over s ≤ t of the largest grid mean m whose own e-process (log_evidence at
    m) has reached 1/alpha by s, rejected means forming a prefix of the grid."""
    x = bernoulli(0.25, (1, 150), np.random.default_rng(7))[0]
    monitor = CertificateMonitor(C, 0.1, resolution=0.01)
    lowers = []
    for v in x:
        monitor.update(v)
        lowers.append(monitor.lower)
    grid = np.unique(np.append(np.arange(1, 100) / 100, C))
    ev = np.stack([log_evidence(x, m) for m in grid])  # (means, episodes)
    rejected = ev >= math.log(10)
    expected = []
    best = 0.0
    for t in range(len(x)):
        col = rejected[:, t]
        n = len(col) if col.all() else int(np.argmin(col))
        if n:
            best = max(best, float(grid[n - 1]))
        expected.append(best)
    assert lowers == expected
    assert 0.1 < lowers[-1] < 0.25 + 0.1
    assert np.all(np.diff(lowers) >= 0)


def test_numpy_costs_are_costs() -> None:
    monitor = CertificateMonitor(C, 0.01)
    for x in (np.float32(0.25), np.float64(0.5), np.int64(1), np.array(0.0), np.uint8(0)):
        monitor.update(x)
    assert monitor.episodes == 5
    with pytest.raises(PlannerError, match="not a number"):
        monitor.update(np.array([0.1]))


@pytest.mark.parametrize("bad", [float("nan"), -0.01, 1.01, float("inf"), "0.3", None, True,
                                 [0.1]])
def test_bad_costs_are_refused_not_clipped(bad) -> None:
    monitor = CertificateMonitor(C, 0.01)
    monitor.update(0.5)
    with pytest.raises(PlannerError, match="episode 2"):
        monitor.update(bad)
    assert monitor.episodes == 1  # nothing was counted
    with pytest.raises(PlannerError, match="costs must lie"):
        log_evidence(np.array([0.1, 1.2]), C)


@pytest.mark.parametrize(("certified", "alpha"), [(0.0, 0.01), (1.2, 0.01), (0.1, 0.0),
                                                  (0.1, 1.0), (float("nan"), 0.1), ("0.1", 0.1)])
def test_bad_certificate_or_alpha_is_refused(certified, alpha) -> None:
    with pytest.raises(PlannerError):
        CertificateMonitor(certified, alpha)


@pytest.fixture(scope="module")
def uav_planner(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pacplan.export import export_planner

    return export_planner(ROOT / "results" / "uav", tmp_path_factory.mktemp("planner") / "uav")


def test_planner_end_episode_feeds_its_own_monitor(uav_planner: Path) -> None:
    planner = Planner.load(uav_planner)
    assert planner.monitor.certified == planner.certified_cost
    rng = np.random.default_rng(8)
    with pytest.raises(PlannerError, match="no episode open"):
        planner.end_episode(cost=0.1)
    alarms = []
    for _ in range(400):
        planner.start_episode(rng)
        alarms.append(planner.end_episode(cost=1.0 if rng.random() < 0.3 else 0.0))
    assert planner.monitor.episodes == 400 and planner.monitor.alarm
    assert alarms.index(True) + 1 == planner.monitor.alarm_episode
    planner.start_episode(rng)
    with pytest.raises(PlannerError, match="not a cost"):
        planner.end_episode(cost=1.5)
    assert planner.end_episode() is True  # no cost: closes the episode, alarm unchanged
    assert planner.monitor.episodes == 400


def test_cli_monitor_verdicts_and_plot(uav_planner: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(9)
    holding = tmp_path / "holding.csv"  # deployed at half the certified mean: it holds
    half = Planner.load(uav_planner).certified_cost / 2
    holding.write_text("episode,cost\n" + "".join(f"{i},{v:g}\n" for i, v in enumerate(
        uav_like(half, (1, 600), rng)[0])))
    code, out, err = cli(["monitor", str(uav_planner), str(holding)], capsys)
    assert code == 0, err
    assert "holding: no alarm in 600 episodes" in out
    shifted = uav_like(0.3, (1, 400), rng)[0]
    alarm = tmp_path / "costs.jsonl"
    alarm.write_text("".join(json.dumps({"cost": float(v)} if i % 2 else float(v)) + "\n"
                             for i, v in enumerate(shifted)))
    plot = tmp_path / "monitor.png"
    code, out, err = cli(["monitor", str(uav_planner), str(alarm), "--alpha", "0.05", "--plot",
                          str(plot)], capsys)
    certified = Planner.load(uav_planner).certified_cost
    first = int(np.argmax(log_evidence(shifted, certified) >= math.log(20))) + 1
    assert code == 1, err
    assert f"ALARM at episode {first}:" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(("name", "text", "line", "what"), [
    ("c.csv", "0.1\n0.2\n1.3\n", 3, "not a cost in [0, 1]"),
    ("c.csv", "0.1\nnan\n", 2, "NaN"),
    ("c.csv", "0.1\n\nabc\n", 3, "not a number"),
    ("c.csv", "0.1\n0.2,0.3\n", 2, "2 fields"),
    ("c.csv", "-0.5\n", 1, "not a cost"),
    ("c.jsonl", "0.1\n{\"x\": 1}\n", 2, "without a \"cost\""),
    ("c.jsonl", "0.1\n\"0.2\"\n", 2, "not a number"),
    ("c.jsonl", "0.1\nNaN\n", 2, "NaN"),
    ("c.jsonl", "true\n", 1, "not a number"),
])
def test_cli_monitor_bad_costs_one_line_exit_2(uav_planner: Path, tmp_path: Path, name: str,
                                               text: str, line: int, what: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, out, err = cli(["monitor", str(uav_planner), str(path)], capsys)
    assert code == 2
    assert f"{path} line {line}: " in err and what in err, err
    assert len(err.strip().splitlines()) == 1 and out == ""


# -- issue 36: numbers at the edge of float64, a fast exact path for logs, streamed input -------
def test_an_alpha_whose_inverse_overflows_still_alarms() -> None:
    """log(1/alpha) is +inf for alpha < 5.6e-309, so the evidence never reached it and the
    monitor could not alarm; -log(alpha) is finite down to the smallest float."""
    for alpha in (1e-310, 5e-324):
        monitor = CertificateMonitor(C, alpha)
        for _ in range(1000):
            monitor.update(1.0)
        assert monitor.alarm, alpha
        assert monitor.log_e_value >= -math.log(alpha)


def test_a_certified_cost_too_small_to_bet_against_is_refused() -> None:
    """A subnormal certified cost makes cost / certified overflow (every wealth inf, the
    evidence NaN: never an alarm); refused in one line. A normal one however small works."""
    for tiny in (1e-310, 5e-324):
        with pytest.raises(PlannerError, match="certified cost must be at least") as info:
            CertificateMonitor(tiny, 0.01)
        assert "\n" not in str(info.value)
        with pytest.raises(PlannerError, match="certified cost must be at least"):
            log_evidence(np.array([0.5]), tiny)
    monitor = CertificateMonitor(1e-300, 0.01)
    assert monitor.update(1.0) and math.isfinite(monitor.log_e_value)
    assert monitor.lower == 1e-300  # the certified cost is a grid point, and it is rejected


@pytest.mark.parametrize("resolution", [1e-7, 5e-5, 0.0, float("nan"), 0.2, True])
def test_a_resolution_that_costs_minutes_or_memory_is_refused(resolution: float) -> None:
    """The bound's grid has 1/resolution means and every episode costs 79 logs each: 1e-7
    was 6 GB of state and seconds per episode."""
    with pytest.raises(PlannerError, match="resolution must be"):
        CertificateMonitor(C, 0.01, resolution=resolution)


def test_the_finest_and_coarsest_resolutions_are_accepted() -> None:
    for resolution in (1e-4, 0.1):
        monitor = CertificateMonitor(C, 0.01, resolution=resolution)
        monitor.update_many(np.ones(50))
        assert monitor.alarm and monitor.lower > 0.5


def _stream(kind: str, n: int, rng: np.random.Generator) -> np.ndarray:
    if kind == "bernoulli":
        return bernoulli(0.2, (1, n), rng)[0]
    if kind == "uav":
        return uav_like(0.12, (1, n), rng)[0]
    if kind == "dense":
        return np.clip(rng.normal(0.15, 0.1, n), 0.0, 1.0)
    if kind == "holding":
        return uav_like(0.06, (1, n), rng)[0]
    if kind == "zeros-then-ones":
        return np.concatenate([np.zeros(n // 2), np.ones(n - n // 2)])
    if kind == "twelve-values":  # more repeated costs than the tables kept
        return rng.choice(np.linspace(0.0, 0.4, 12), n)
    return rng.choice([0.0, 0.5, 1.0], n)


@pytest.mark.parametrize("kind", ["bernoulli", "uav", "dense", "holding", "zeros-then-ones",
                                  "three-values", "twelve-values"])
@pytest.mark.parametrize(("certified", "alpha", "resolution"),
                         [(C, 0.01, 2e-3), (0.1234567, 1e-6, 0.01), (1e-5, 0.05, 0.01)])
def test_update_many_gives_the_same_alarm_and_bounds_as_one_at_a_time(
        kind: str, certified: float, alpha: float, resolution: float) -> None:
    """The oracle is `update` fed one cost at a time: `update_many` over blocks of any size
    gives the same alarm episode, the same lower bound after every episode and the same
    evidence at the certified cost."""
    rng = np.random.default_rng(hash((kind, certified)) % 2**32)
    x = _stream(kind, 1500, rng)
    oracle = CertificateMonitor(certified, alpha, resolution=resolution)
    expected = []
    for v in x:
        oracle.update(float(v))
        expected.append(oracle.lower)
    fast = CertificateMonitor(certified, alpha, resolution=resolution)
    lowers: list[float] = []
    start = 0
    for size in [1, 7, 300, 1000, 10_000]:  # calls of any size, the last one past the end
        lowers += fast.update_many(x[start:start + size]).tolist()
        start += size
    assert fast.episodes == oracle.episodes == x.size
    assert fast.alarm_episode == oracle.alarm_episode and fast.alarm == oracle.alarm
    assert lowers == expected
    assert math.isclose(fast.log_e_value, oracle.log_e_value, rel_tol=1e-12, abs_tol=1e-12)
    fast.update(0.3)  # the two paths share one state: either may follow the other
    oracle.update(0.3)
    assert fast.lower == oracle.lower and fast.episodes == oracle.episodes


def test_update_many_refuses_a_bad_cost_naming_its_episode_and_adds_none() -> None:
    monitor = CertificateMonitor(C, 0.01)
    monitor.update_many(np.array([0.1, 0.2]))
    for bad, word in [(np.array([0.1, np.nan]), "NaN"), (np.array([0.0, 1.5]), "not a cost"),
                      ([0.1, True], "not a number"), ([0.1, "0.2"], "not a number")]:
        with pytest.raises(PlannerError, match=f"episode 4: .*{word}"):
            monitor.update_many(bad)
    for bad in (np.array([True, False]), np.zeros((2, 2)), np.array(["0.1"])):
        with pytest.raises(PlannerError, match="1-D array of numbers"):
            monitor.update_many(bad)
    assert monitor.episodes == 2
    assert monitor.update_many([]).size == 0 and monitor.episodes == 2


def test_cli_monitor_alarms_at_an_alpha_of_the_smallest_float(uav_planner: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    costs = tmp_path / "c.csv"
    costs.write_text("1\n" * 1500)
    code, out, err = cli(["monitor", str(uav_planner), str(costs), "--alpha", "5e-324"], capsys)
    assert code == 1, err
    assert "ALARM at episode" in out and "level 1 − 4.94066e-324" in out


@pytest.mark.parametrize(("name", "text", "line"), [
    ("c.csv", "cost,cost\n0.9,0.1\n", 1),
    ("c.csv", "\nepisode, Cost ,cost\n1,0.9,0.1\n", 2),
    ("c.jsonl", "{\"cost\": 0.9, \"cost\": 0.1}\n", 1),
    ("c.jsonl", "0.5\n{\"episode\": 2, \"cost\": 0.9, \"x\": 1, \"cost\": 0.1}\n", 2),
])
def test_cli_monitor_refuses_two_cost_fields_alike_in_both_formats(
        uav_planner: Path, tmp_path: Path, name: str, text: str, line: int,
        capsys: pytest.CaptureFixture[str]) -> None:
    """CSV took the first column, JSON the last value: 0.9 or 0.1 for the same record."""
    path = tmp_path / name
    path.write_text(text)
    code, out, err = cli(["monitor", str(uav_planner), str(path)], capsys)
    assert code == 2 and out == ""
    assert f"{path} line {line}: two 'cost' fields" in err, err
    assert len(err.strip().splitlines()) == 1


BIG = 10 * 2**20
DEEP = 100_000


@pytest.mark.parametrize(("name", "text", "what"), [
    ("c.jsonl", "0.1\n" + "1" * 400 + "\n", "inf is not a cost"),  # was an OverflowError
    ("c.jsonl", "0.1\n{\"cost\": " + "9" * 5000 + "}\n", "inf is not a cost"),
    ("c.jsonl", "0.1\n1e999999\n", "inf is not a cost"),
    ("c.jsonl", "0.1\n" + "[" * DEEP + "]" * DEEP + "\n", "nested too deeply"),  # RecursionError
    ("c.jsonl", "0.1\n" + "{\"a\":" * DEEP + "1" + "}" * DEEP + "\n", "nested too deeply"),
    ("c.jsonl", "0.1\n" + "1" * BIG + "\n", "longer than 1,048,576 characters"),
    ("c.csv", "0.1\n0." + "0" * 200_000 + "1\n", "field larger than field limit"),  # _csv.Error
    ("c.csv", "0.1\n" + "1" * BIG + "\n", "longer than 1,048,576 characters"),
    ("c.csv", "0.1\n1e999999\n", "inf is not a cost"),
    ("c.csv", "0.1\n0.0_1\n", "'0.0_1' is not a number"),  # Python's float() took 0.01
    ("c.csv", "0.1\n\u0660.\u0665\n", "is not a number"),  # Arabic-Indic digits, 0.5 to float()
])
def test_cli_monitor_over_long_and_over_deep_lines_are_one_line_errors(
        uav_planner: Path, tmp_path: Path, name: str, text: str, what: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, out, err = cli(["monitor", str(uav_planner), str(path)], capsys)
    assert code == 2 and out == ""
    assert f"{path} line 2: " in err and what in err, err[:300]
    assert len(err.strip().splitlines()) == 1 and len(err) < 500


def test_cli_monitor_refuses_a_fifo_instead_of_waiting_on_it(uav_planner: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    """It blocked forever in open(). A writer that turns up after 20 s feeds the FIFO, so the
    old behaviour fails this test instead of hanging it."""
    import os
    import threading
    import time

    fifo = tmp_path / "costs.csv"
    os.mkfifo(fifo)
    done = threading.Event()

    def late_writer() -> None:
        if done.wait(20):
            return
        try:  # only succeeds if a reader is blocked on the FIFO
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        os.write(fd, b"0.1\n")
        os.close(fd)

    writer = threading.Thread(target=late_writer, daemon=True)
    writer.start()
    t0 = time.perf_counter()
    try:
        code, out, err = cli(["monitor", str(uav_planner), str(fifo)], capsys)
    finally:
        done.set()
        writer.join()
    assert code == 2 and "not a regular file" in err and out == "", err
    assert time.perf_counter() - t0 < 15
    for other in (tmp_path, Path("/dev/null")):
        code, _, err = cli(["monitor", str(uav_planner), str(other)], capsys)
        assert code == 2 and "not a regular file" in err, err


def test_cli_monitor_streams_the_log_in_constant_memory(uav_planner: Path, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]
                                                        ) -> None:
    """The whole file, its lines and their floats were held at once (a 1 GB log was a
    MemoryError); now a block of costs at a time: peak memory does not grow with the log."""
    import tracemalloc

    rng = np.random.default_rng(12)
    peaks = []
    often = Planner.load(uav_planner).certified_cost  # costs 0.5 this often: half the certificate
    for n in (10_000, 100_000):
        path = tmp_path / f"c{n}.csv"
        path.write_text("".join("0.5\n" if v else "0\n" for v in rng.random(n) < often))
        tracemalloc.start()
        code, out, err = cli(["monitor", str(uav_planner), str(path)], capsys)
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert code == 0 and f"holding: no alarm in {n} episodes" in out, err
    # 10 × the episodes, the same peak (the planner's own load is most of it); the old reader
    # held ~200 bytes a line more: 18 MB more here
    assert peaks[1] < peaks[0] + 2**20, peaks


def test_cli_monitor_feeds_the_same_verdict_as_one_cost_at_a_time(
        uav_planner: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Costs go to the monitor in blocks; the printed verdict and bound are those of update()
    fed each cost in turn, across the reader's chunk boundaries."""
    from pacplan.cli import monitor as cli_monitor

    monkeypatch.setattr(cli_monitor, "CHUNK", 700)
    x = uav_like(0.2, (1, 2500), np.random.default_rng(13))[0]
    path = tmp_path / "c.csv"
    path.write_text("".join(f"{float(v)!r}\n" for v in x))
    assert np.array_equal(cli_monitor.read_costs(path), x)
    certified = Planner.load(uav_planner).certified_cost
    oracle = CertificateMonitor(certified, 0.01)
    for v in x:
        oracle.update(float(v))
    code, out, _ = cli(["monitor", str(uav_planner), str(path)], capsys)
    assert code == 1 and f"ALARM at episode {oracle.alarm_episode}:" in out
    assert f"lower bound on the deployed mean cost: {100 * oracle.lower:.1f} %" in out


def test_the_plot_trace_keeps_the_bound_exactly_and_the_mean_thinned() -> None:
    from pacplan.cli.monitor import _Trace

    x = uav_like(0.2, (1, 30_000), np.random.default_rng(14))[0]
    monitor = CertificateMonitor(C, 0.01)
    trace, total, lowers = _Trace(points=500), 0.0, []
    for chunk in np.array_split(x, 7):
        start = monitor.episodes
        got = monitor.update_many(chunk)
        trace.add(start, chunk, got, total)
        total += float(chunk.sum())
        lowers += got.tolist()
    rose = np.flatnonzero(np.diff(lowers, prepend=0.0) > 0)
    assert trace.rises == [(int(i) + 1, lowers[i]) for i in rose]
    assert 500 <= len(trace.episodes) <= 1000
    e = np.asarray(trace.episodes)
    assert np.allclose(trace.means, np.cumsum(x)[e - 1] / e, rtol=1e-12)


@pytest.mark.parametrize("target", ["costs", "costs-link", "planner.json", "manifest.json",
                                    "planner-dir", "new-file-in-planner"])
def test_cli_monitor_plot_never_writes_over_an_input_or_into_the_planner(
        uav_planner: Path, tmp_path: Path, target: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--plot costs.csv` replaced the log with a PNG, `--plot P/planner.json` the planner."""
    import os
    import shutil

    planner = shutil.copytree(uav_planner, tmp_path / "planner")
    costs = tmp_path / "costs.csv"
    costs.write_text("0.1\n0.2\n")
    plot = {"costs": costs, "planner.json": planner / "planner.json",
            "manifest.json": planner / "manifest.json", "planner-dir": planner,
            "new-file-in-planner": planner / "plot.png"}.get(target)
    if target == "costs-link":
        plot = tmp_path / "link.csv"
        os.link(costs, plot)
    files = [costs, *(p for p in planner.rglob("*") if p.is_file())]
    before = {p: p.read_bytes() for p in files}
    code, out, err = cli(["monitor", str(planner), str(costs), "--plot", str(plot)], capsys)
    assert code == 2 and out == "" and "--plot" in err, err
    inputs = ("costs", "costs-link", "planner-dir")
    assert ("is the input" if target in inputs else "inside the planner directory") in err
    assert len(err.strip().splitlines()) == 1
    assert sorted(p for p in planner.rglob("*") if p.is_file()) == sorted(files[1:])
    assert {p: p.read_bytes() for p in files} == before
    Planner.load(planner)  # still a planner


@pytest.mark.parametrize("target", ["fifo", "folder", "."])
def test_cli_monitor_plot_to_a_fifo_or_folder_is_refused_before_reading(
        uav_planner: Path, tmp_path: Path, target: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--plot over a FIFO (or /dev/null, as root) replaced it with the PNG; `.` was a
    ValueError traceback, after the whole log had been read."""
    import os

    costs = tmp_path / "costs.csv"
    costs.write_text("0.1\n0.2\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    plot = target if target == "." else str(tmp_path / target)
    code, out, err = cli(["monitor", str(uav_planner), str(costs), "--plot", plot], capsys)
    assert code == 2 and out == "" and "--plot" in err, err
    assert len(err.strip().splitlines()) == 1
    assert (tmp_path / "fifo").is_fifo() and (tmp_path / "folder").is_dir()


@pytest.mark.parametrize(("name", "text"), [("bom.csv", "cost\n0.1\n0.3\n"),
                                            ("bom.csv", "0.1\n0.3\n"),
                                            ("bom.jsonl", '{"cost": 0.1}\n0.3\n')])
def test_cli_monitor_reads_a_log_that_starts_with_a_byte_order_mark(
        uav_planner: Path, tmp_path: Path, name: str, text: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Excel's "CSV UTF-8" starts with a BOM: its header '\\ufeffcost' was 'not a number'."""
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    code, out, err = cli(["monitor", str(uav_planner), str(path)], capsys)
    assert code == 0, err
    assert "2 episodes, mean cost 20.00 %" in out
    from pacplan.cli.monitor import read_costs

    assert read_costs(path).tolist() == [0.1, 0.3]
