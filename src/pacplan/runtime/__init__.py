"""Run an exported, certified planner with numpy and onnxruntime only (no torch, no PyBullet).

    planner = Planner.load("planner/")          # every file's sha256 checked
    planner.start_episode(np.random.default_rng())   # draw ONE policy from p: the certified use
    decision = planner.act(observation)          # UAV: a primitive; quadruped: gait parameters
    planner.end_episode()

Nothing here imports another pacplan module, so a robot needs only this package, numpy and
onnxruntime (docs/deploy.md).
"""

from pacplan.runtime.bundle import PlannerError, UncertifiedUseWarning
from pacplan.runtime.decide import GaitDecision, PrimitiveDecision
from pacplan.runtime.planner import Planner

__all__ = ["GaitDecision", "Planner", "PlannerError", "PrimitiveDecision",
           "UncertifiedUseWarning"]
