"""One `Planner` shared by threads: each thread's episode acts with its own policy, exactly as a
single-threaded run of the same episodes does, and the planner's own episode (start_episode)
refuses a second thread instead of mixing two episodes' policies."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pacplan.export import export_planner
from pacplan.runtime import Episode, Planner, PlannerError

RESULTS = Path(__file__).resolve().parents[2] / "results"
THREADS, EPISODES, STEPS = 8, 6, 5


@pytest.fixture(scope="module")
def planners(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("planners")
    return {w: export_planner(RESULTS / w, base / w) for w in ("uav", "quadruped")}


def _observations(world: str, seed: int) -> list[Any]:
    """The images (and quadruped proprioception) of episode `seed`: varied, all valid."""
    rng = np.random.default_rng(10_000 + seed)
    out: list[Any] = []
    for _ in range(STEPS):
        depth = rng.uniform(0.3, 20.0, (50, 50)).astype(np.float32)
        out.append(depth if world == "uav" else
                   {"depth": depth, "proprio": rng.uniform(-1, 1, 22).astype(np.float32)})
    return out


def _record(decision: Any) -> tuple:
    """Everything a decision says, as comparable values."""
    if hasattr(decision, "primitive"):
        return (decision.primitive, decision.scores.tobytes(), decision.trajectory_m.tobytes())
    return (decision.eta.tobytes(), decision.a1, decision.a2, decision.a_st, decision.omega)


def _episode(planner: Planner, world: str, seed: int) -> tuple[int, list[tuple]]:
    """Episode `seed` through a handle: its policy, its decisions; its cost fed on the way out."""
    episode = planner.episode(np.random.default_rng(seed))
    decisions = [_record(episode.act(obs)) for obs in _observations(world, seed)]
    episode.end(cost=(seed % 7) / 10)
    return episode.policy, decisions


def _in_threads(work: Callable[[int], None]) -> list[BaseException]:
    """Run work(0 … THREADS-1) in threads released together; the exceptions they raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(THREADS)

    def run(i: int) -> None:
        try:
            start.wait()
            work(i)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


@pytest.mark.parametrize("world", ["uav", "quadruped"])
def test_one_planner_in_eight_threads_acts_exactly_as_the_serial_run(
        planners: dict[str, Path], world: str) -> None:
    """8 threads, each running its own episodes on one shared planner (onnxruntime with 2
    threads of its own), give exactly the policies and decisions of the same episodes run one
    after another, with no error; the monitor counts every episode's cost once."""
    seeds = [[i * EPISODES + e for e in range(EPISODES)] for i in range(THREADS)]
    serial = Planner.load(planners[world])
    oracle = {s: _episode(serial, world, s) for row in seeds for s in row}
    assert len({policy for policy, _ in oracle.values()}) > 1  # different episodes' policies

    shared = Planner.load(planners[world], threads=2)
    got: dict[int, tuple[int, list[tuple]]] = {}
    errors = _in_threads(lambda i: got.update((s, _episode(shared, world, s)) for s in seeds[i]))
    assert errors == []
    assert got == oracle
    assert shared.monitor.episodes == serial.monitor.episodes == THREADS * EPISODES
    assert shared.monitor.log_e_value == pytest.approx(serial.monitor.log_e_value, rel=1e-12)


def test_start_episode_in_a_second_thread_is_refused_not_mixed(
        planners: dict[str, Path]) -> None:
    """The planner's own episode is one at a time: a second thread drawing while it is open is
    a PlannerError naming the per-thread handle, and the open episode keeps its policy. Acting
    on it and ending it from another thread (a ROS executor's callbacks) is allowed."""
    planner = Planner.load(planners["uav"])
    obs = _observations("uav", 0)[0]
    policy = planner.start_episode(np.random.default_rng(3))
    expected = _record(Episode(planner, int(np.flatnonzero(planner.policy_index == policy)[0]))
                       .act(obs))
    outcome: dict[str, Any] = {}

    def other_thread() -> None:
        try:
            planner.start_episode(np.random.default_rng(4))
        except PlannerError as exc:
            outcome["refused"] = str(exc)
        outcome["decision"] = _record(planner.act(obs))  # the open episode's policy acts

    thread = threading.Thread(target=other_thread)
    thread.start()
    thread.join()
    assert "another thread's episode is open" in outcome["refused"]
    assert "planner.episode(rng)" in outcome["refused"]
    assert planner.policy == policy
    assert outcome["decision"] == expected == _record(planner.act(obs))

    ended = threading.Thread(target=lambda: planner.end_episode(cost=0.5))
    ended.start()
    ended.join()
    assert planner.policy is None and planner.monitor.episodes == 1
    thread = threading.Thread(target=lambda: outcome.update(
        second=planner.start_episode(np.random.default_rng(4))))
    thread.start()
    thread.join()
    assert outcome["second"] == planner.policy  # once closed, any thread may open the next


def test_an_episode_handle_acts_until_it_ends_and_feeds_its_cost_once(
        planners: dict[str, Path]) -> None:
    planner = Planner.load(planners["uav"])
    obs = _observations("uav", 1)[0]
    a = planner.episode(np.random.default_rng(5))
    b = planner.episode(np.random.default_rng(6))
    assert planner.policy is None  # handles leave the planner's own episode alone
    assert a.act(obs) is not None and a.open
    assert a.end(cost=0.25) is False and not a.open
    with pytest.raises(PlannerError, match="ended"):
        a.act(obs)
    with pytest.raises(PlannerError, match="once"):
        a.end(cost=0.25)
    a.end()  # closing again without a cost is harmless
    with pytest.raises(PlannerError, match="not a cost"):
        b.end(cost=1.5)
    assert b.open and b.act(obs) is not None  # a refused cost leaves the episode open
    b.end(cost=0.0)
    assert planner.monitor.episodes == 2
    with pytest.raises(PlannerError, match="Generator"):
        planner.episode(42)  # type: ignore[arg-type]
