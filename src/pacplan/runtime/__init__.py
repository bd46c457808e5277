"""Run an exported, certified planner with numpy and onnxruntime only (no torch, no PyBullet).

    planner = Planner.load("planner/")          # every file's sha256 checked
    planner.start_episode(np.random.default_rng())   # draw ONE policy from p: the certified use
    decision = planner.act(observation)          # UAV: a primitive; quadruped: gait parameters
    planner.end_episode(cost=c)                  # c in [0, 1] feeds planner.monitor, which
                                                 # alarms if the certificate stops holding

Nothing here imports another pacplan module, so a robot needs only this package, numpy and
onnxruntime (docs/deploy.md).
"""

from pacplan.runtime.bundle import PlannerError, UncertifiedUseWarning
from pacplan.runtime.decide import GaitDecision, PrimitiveDecision
from pacplan.runtime.monitor import CertificateMonitor
from pacplan.runtime.planner import Planner

__all__ = ["CertificateMonitor", "GaitDecision", "Planner", "PlannerError", "PrimitiveDecision",
           "UncertifiedUseWarning"]
