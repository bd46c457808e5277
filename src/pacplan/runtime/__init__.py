"""`pacplan.runtime` is `pacplan_runtime` (runtime/ in this repository, its own small wheel).

The robot's code lives in a distribution of its own so that a robot installs numpy,
onnxruntime and that wheel, not pacplan's torch and PyBullet (docs/deploy.md). This alias keeps
`from pacplan.runtime import Planner` and `pacplan.runtime.monitor` working: the submodules are
the same module objects, so `PlannerError` and the rest are one class under either name.
"""

import sys

import pacplan_runtime
from pacplan_runtime import (
    CertificateMonitor,
    Episode,
    GaitDecision,
    GymDecision,
    Planner,
    PlannerError,
    PrimitiveDecision,
    UncertifiedUseWarning,
    bundle,
    decide,
    load,
    monitor,
    planner,
    policies,
    spec,
)

for _module in (bundle, decide, load, monitor, planner, policies, spec):
    sys.modules[f"{__name__}.{_module.__name__.rsplit('.', 1)[1]}"] = _module

__version__ = pacplan_runtime.__version__
__all__ = ["CertificateMonitor", "Episode", "GaitDecision", "GymDecision", "Planner",
           "PlannerError", "PrimitiveDecision", "UncertifiedUseWarning"]
