"""`Planner`: the certified object is "draw one policy from p, then act with it all episode".

`start_episode(rng)` draws the policy (the certified use); `act` then maps each observation to
a decision deterministically. The most likely policy, or a new draw while an episode is open, is
available but warns (`UncertifiedUseWarning`): the certificate bounds the expected cost of the
randomised planner, not of any one policy, and not of re-drawing whenever a draw looks bad.
Acting outside an episode is an error.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np

from pacplan_runtime.bundle import PlannerError, UncertifiedUseWarning
from pacplan_runtime.decide import (
    GaitDecision,
    PrimitiveDecision,
    QuadrupedDecider,
    UAVDecider,
    run_net,
)
from pacplan_runtime.monitor import CertificateMonitor

_DECIDERS = {"uav": UAVDecider, "quadruped": QuadrupedDecider}


class Planner:
    """An exported planner: the posterior's support, one ONNX net, per-policy weights."""

    def __init__(self, root: Path, spec: dict[str, Any], weights: dict[str, np.ndarray],
                 session: Any) -> None:
        self.root = root
        self.world = str(spec["world"]["name"])
        self.policy_index = np.asarray(spec["posterior"]["policy_index"], dtype=np.int64)
        self.probability = np.asarray(spec["posterior"]["probability"], dtype=np.float64)
        self.certified_cost = float(spec["certified_cost"])
        self._decider = _DECIDERS[self.world](spec["fixed"])
        self._dtype = np.float64 if spec["net"]["dtype"] == "float64" else np.float32
        self._weights = weights
        self._session = session
        self._cumulative = np.cumsum(self.probability)
        self._slot: int | None = None
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
        return None if self._slot is None else int(self.policy_index[self._slot])

    def start_episode(self, rng: np.random.Generator | None = None,
                      mode: str = "sample") -> int:
        """Open an episode and return the policy drawn from p (the run's policy index).

        mode="most_likely" takes the most probable policy instead: not the certified object,
        so it warns. Drawing again while an episode is open (call `end_episode` first) warns
        too: choosing among draws is not the certified use.
        """
        if mode not in ("sample", "most_likely"):
            raise PlannerError(f"mode must be 'sample' or 'most_likely', got {mode!r}")
        if mode == "sample" and not isinstance(rng, np.random.Generator):
            raise PlannerError("start_episode needs a numpy Generator to draw the policy "
                               f"(np.random.default_rng()), got {type(rng).__name__}")
        if self._slot is not None:
            warnings.warn("a new policy drawn while an episode is open: re-drawing mid-episode "
                          "is not what the certificate covers (call end_episode() first)",
                          UncertifiedUseWarning, stacklevel=2)
        if mode == "most_likely":
            warnings.warn("acting with the most likely policy: the certificate bounds the cost "
                          "of drawing a policy from p each episode, not of this one policy",
                          UncertifiedUseWarning, stacklevel=2)
            slot = int(np.argmax(self.probability))
        else:
            u = rng.random() * self._cumulative[-1]
            slot = min(int(np.searchsorted(self._cumulative, u, side="right")),
                       len(self._cumulative) - 1)
        self._slot = slot
        return int(self.policy_index[slot])

    def use_most_likely(self) -> int:
        """`start_episode(mode="most_likely")`: an uncertified use, named as such (warns)."""
        return self.start_episode(mode="most_likely")

    def end_episode(self, cost: float | None = None) -> bool:
        """Close the episode; the next one draws a fresh policy. `cost` (in [0, 1]) feeds
        `self.monitor`; returns its alarm (docs/monitor.md)."""
        if cost is not None:
            if self._slot is None:
                raise PlannerError("end_episode(cost=...) with no episode open: a cost belongs "
                                   "to the episode started by start_episode()")
            self.monitor.update(cost)
        self._slot = None
        return self.monitor.alarm

    def act(self, observation: Any) -> PrimitiveDecision | GaitDecision:
        """The decision of the episode's policy on one observation (UAV: depth (50, 50) m;
        quadruped: {"depth": (50, 50) m, "proprio": (22,)})."""
        if self._slot is None:
            raise PlannerError("act() before start_episode(): no policy has been drawn for "
                               "this episode")
        feeds = self._decider.inputs(observation)
        for name, w in self._weights.items():
            feeds[name] = w[self._slot].astype(self._dtype, copy=False)
        return self._decider.decide(run_net(self._session, feeds))
