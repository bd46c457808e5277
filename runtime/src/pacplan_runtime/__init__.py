"""Run an exported, certified planner with numpy and onnxruntime only (no torch, no PyBullet).

    planner = Planner.load("planner/")          # every file's sha256 checked
    planner.start_episode(np.random.default_rng())   # draw ONE policy from p: the certified use
    decision = planner.act(observation)          # UAV: a primitive; quadruped: gait
                                                 # parameters; gym and certify-policy's
                                                 # policies: decision.action
    planner.end_episode(cost=c)                  # c in [0, 1] feeds planner.monitor, which
                                                 # alarms if the certificate stops holding
    ep = planner.episode(rng)                    # threads sharing one planner: a handle each,
    ep.act(observation); ep.end(cost=c)          # (docs/deploy.md, Threads)

A distribution of its own (`pacplan_runtime`, built from runtime/ in the pacplan repository) so
that a robot installs a small wheel needing only numpy and onnxruntime, not pacplan with its
torch and PyBullet (docs/deploy.md). `pacplan.runtime` re-exports it for code written against
pacplan.
"""

from pacplan_runtime.bundle import PlannerError, UncertifiedUseWarning
from pacplan_runtime.decide import GaitDecision, GymDecision, PrimitiveDecision
from pacplan_runtime.monitor import CertificateMonitor
from pacplan_runtime.planner import Episode, Planner

__all__ = ["CertificateMonitor", "Episode", "GaitDecision", "GymDecision", "Planner",
           "PlannerError", "PrimitiveDecision", "UncertifiedUseWarning"]

__version__ = "0.2.0"  # released with pacplan, same number (its pyproject pins this)
