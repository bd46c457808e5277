"""`Planner`: the certified object is "draw one policy from p, then act with it all episode".

`start_episode(rng)` draws the policy (the certified use); `act` then maps each observation to
a decision deterministically. The most likely policy, or a new draw while an episode is open, is
available but warns (`UncertifiedUseWarning`): the certificate bounds the expected cost of the
randomised planner, not of any one policy, and not of re-drawing whenever a draw looks bad.
Acting outside an episode is an error.

Threads: one Planner may be shared. The drawn policy lives in an `Episode`, never in state that
every caller reads: `planner.episode(rng)` gives each thread (robot, simulator worker) a handle
of its own, and nothing else a decision reads changes after load (onnxruntime's `run` may be
called from several threads at once). The planner's own episode (`start_episode`, `act`,
`end_episode`) is one episode at a time: a thread drawing while another thread's episode is
open is refused, since the two would otherwise act with each other's policy.
"""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from pacplan_runtime.bundle import PlannerError, UncertifiedUseWarning
from pacplan_runtime.decide import GaitDecision, GymDecision, PrimitiveDecision
from pacplan_runtime.monitor import CertificateMonitor

Decision = PrimitiveDecision | GaitDecision | GymDecision


class Episode:
    """One episode's policy, drawn once from p (`Planner.episode`): act with it until `end`.

    The handle, not the planner, holds the draw, so episodes open at once in several threads
    never act with each other's policy. It may be passed between threads (a callback on one,
    the next on another); calls on one handle from two threads at once are safe too.
    """

    def __init__(self, planner: Planner, slot: int) -> None:
        self._planner = planner
        self._slot = slot
        self._open = True  # set False under the planner's lock

    @property
    def policy(self) -> int:
        """The run's index of this episode's policy."""
        return int(self._planner.policy_index[self._slot])

    @property
    def open(self) -> bool:
        """False once `end` was called."""
        return self._open

    def act(self, observation: Any) -> Decision:
        """This episode's policy's decision on one observation (see `Planner.act`)."""
        if not self._open:
            raise PlannerError("act() on an episode that has ended: draw a new one for the "
                               "next episode")
        return self._planner._decide(self._slot, observation)

    def end(self, cost: float | None = None) -> bool:
        """Close the episode; `cost` (in [0, 1]) feeds the planner's monitor once. Returns
        the monitor's alarm (docs/monitor.md)."""
        return self._planner._close(self, cost)

    def __repr__(self) -> str:
        return f"Episode(policy={self.policy}, {'open' if self._open else 'ended'})"


class Planner:
    """An exported planner: the posterior's support and its policies (one ONNX net with
    per-policy weights for a world's run; one ONNX model per policy for `certify-policy`)."""

    def __init__(self, root: Path, spec: dict[str, Any], policies: Any) -> None:
        self.root = root
        self.world = str(spec["world"]["name"]) if "world" in spec else "policies"
        """The world's name; "policies" for policies certified with `certify-policy`."""
        self.environment = spec.get("environment")
        """For certified policies: the Gymnasium environment they were certified on (id,
        kwargs, Gymnasium's version, its code's sha256)."""
        self.horizon: int | None = spec.get("horizon")
        """For certified policies: the most steps an episode had when its cost was measured
        (the certificate holds for episodes ended there, or earlier by the environment)."""
        self.cost_rule: dict[str, Any] | None = spec.get("cost")
        """For certified policies: how an episode's cost was computed, as certified (`cost`:
        return, terminated, success or module:function, with its bounds or success key); feed
        the monitor costs computed the same way."""
        self.policy_index = np.asarray(spec["posterior"]["policy_index"], dtype=np.int64)
        self.probability = np.asarray(spec["posterior"]["probability"], dtype=np.float64)
        self.certified_cost = float(spec["certified_cost"])
        self._policies = policies  # decide(slot, obs): fixed at load, read by every thread
        self._cumulative = np.cumsum(self.probability)
        self._lock = threading.Lock()  # the planner's own episode, and the monitor
        self._current: Episode | None = None
        self._owner: int | None = None  # the thread that drew _current
        self.monitor = CertificateMonitor(self.certified_cost, alpha=0.01)
        """Watches the certificate: fed by end_episode(cost=...); replace it to change alpha."""

    @classmethod
    def load(cls, path: str | Path, threads: int = 1) -> Planner:
        """Load a planner directory after checking every file's sha256 against manifest.json;
        `threads`: onnxruntime intra-op threads (1: one small net, no thread-pool waits)."""
        from pacplan_runtime.load import open_planner  # checks: docs/verify.md

        return cls(*open_planner(path, threads))

    @property
    def policy(self) -> int | None:
        """The run's index of the policy acting in the open episode (None outside one)."""
        current = self._current
        return None if current is None else current.policy

    def episode(self, rng: np.random.Generator | None = None,
                mode: str = "sample") -> Episode:
        """Draw one policy from p for a new episode and return its handle: `ep.act(obs)`,
        then `ep.end(cost=c)`. Any number may be open at once, in any threads (give each
        thread its own Generator: numpy's are not thread-safe). mode="most_likely" warns, as
        in `start_episode`."""
        self._check_draw(rng, mode)
        return Episode(self, self._draw(rng, mode, stacklevel=3))

    def start_episode(self, rng: np.random.Generator | None = None,
                      mode: str = "sample") -> int:
        """Open the planner's own episode and return the policy drawn from p (the run's
        policy index).

        mode="most_likely" takes the most probable policy instead: not the certified object,
        so it warns. Drawing again while an episode is open (call `end_episode` first) warns
        too: choosing among draws is not the certified use. Drawing while another thread's
        episode is open is a PlannerError: one episode at a time here; threads with an
        episode each use `episode()`.
        """
        self._check_draw(rng, mode)
        with self._lock:
            current, me = self._current, threading.get_ident()
            if current is not None and self._owner != me:
                raise PlannerError(
                    "start_episode() while another thread's episode is open on this planner: "
                    "it holds one episode at a time, so the two threads would act with each "
                    "other's policy; give each thread its own with ep = planner.episode(rng), "
                    "ep.act(obs), ep.end() (docs/deploy.md)")
            if current is not None:
                warnings.warn("a new policy drawn while an episode is open: re-drawing "
                              "mid-episode is not what the certificate covers (call "
                              "end_episode() first)", UncertifiedUseWarning, stacklevel=2)
            episode = Episode(self, self._draw(rng, mode, stacklevel=3))
            if current is not None:
                current._open = False
            self._current, self._owner = episode, me
        return episode.policy

    def _check_draw(self, rng: Any, mode: str) -> None:
        if mode not in ("sample", "most_likely"):
            raise PlannerError(f"mode must be 'sample' or 'most_likely', got {mode!r}")
        if mode == "sample" and not isinstance(rng, np.random.Generator):
            raise PlannerError("drawing the episode's policy needs a numpy Generator "
                               f"(np.random.default_rng()), got {type(rng).__name__}")

    def _draw(self, rng: Any, mode: str, stacklevel: int) -> int:
        """The support slot of a new episode's policy (warns for the most likely one)."""
        if mode == "most_likely":
            warnings.warn("acting with the most likely policy: the certificate bounds the cost "
                          "of drawing a policy from p each episode, not of this one policy",
                          UncertifiedUseWarning, stacklevel=stacklevel)
            return int(np.argmax(self.probability))
        u = rng.random() * self._cumulative[-1]
        return min(int(np.searchsorted(self._cumulative, u, side="right")),
                   len(self._cumulative) - 1)

    def use_most_likely(self) -> int:
        """`start_episode(mode="most_likely")`: an uncertified use, named as such (warns)."""
        return self.start_episode(mode="most_likely")

    def end_episode(self, cost: float | None = None) -> bool:
        """Close the planner's own episode (from any thread); the next one draws a fresh
        policy. `cost` (in [0, 1]) feeds `self.monitor`; returns its alarm (docs/monitor.md)."""
        with self._lock:
            current = self._current
            if current is None:
                if cost is not None:
                    raise PlannerError("end_episode(cost=...) with no episode open: a cost "
                                       "belongs to the episode started by start_episode()")
                return self.monitor.alarm
            alarm = self._close_locked(current, cost)
            self._current = self._owner = None
            return alarm

    def act(self, observation: Any) -> Decision:
        """The decision of the open episode's policy on one observation (UAV: depth (50, 50)
        m; quadruped: {"depth": (50, 50) m, "proprio": (22,)}; gym, and policies certified
        with certify-policy: the flattened observation (obs_dim,), whose
        `GymDecision.action` goes to env.step)."""
        current = self._current
        if current is None:
            raise PlannerError("act() before start_episode(): no policy has been drawn for "
                               "this episode")
        return current.act(observation)

    def _decide(self, slot: int, observation: Any) -> Decision:
        """Policy `slot`'s decision: reads only what was fixed at load, so threads may call it
        at once (onnxruntime's run is thread-safe)."""
        return self._policies.decide(slot, observation)  # type: ignore[no-any-return]

    def _close(self, episode: Episode, cost: float | None) -> bool:
        with self._lock:
            if not episode._open:
                if cost is not None:
                    raise PlannerError("end(cost=...) on an episode that has ended: its cost "
                                       "is fed to the monitor once, when it ends")
                return self.monitor.alarm
            if self._current is episode:
                self._current = self._owner = None
            return self._close_locked(episode, cost)

    def _close_locked(self, episode: Episode, cost: float | None) -> bool:
        """End `episode`, feeding `cost` to the monitor first (a refused cost leaves the
        episode open). The monitor is not thread-safe: callers hold `_lock`."""
        if cost is not None:
            self.monitor.update(cost)
        episode._open = False
        return self.monitor.alarm
