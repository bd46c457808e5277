"""`pacplan export` and `pacplan verify PLANNER`: a certified planner out of its run directory.

write.py builds the planner directory (refusing a certificate that does not verify), check.py
verifies one; what is world-specific (the fixed parts, the ONNX network, its weight layout) each
world's exporter writes (`pacplan.worlds.story.PlannerExporter`, named by its registry entry).
The planner is run by `pacplan_runtime` (runtime/: numpy + onnxruntime only).
"""

from pacplan.export.check import is_planner_dir, verify_planner
from pacplan.export.write import export_planner

__all__ = ["export_planner", "is_planner_dir", "verify_planner"]
