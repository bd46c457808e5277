"""What a world tells the tools above it, so export and report never branch on its name.

A world's registry entry (`pacplan.worlds.base.WorldEntry`) names, by import path, the objects
below; a tool asks the entry and treats every world alike. Adding a world touches `worlds/` and
its registration only.

- `PlannerExporter`: what `pacplan export` writes for the world's planner runtime (the fixed
  parts θ does not hold, the ONNX network, its weight layout and float type).
- `PaperStory`: the paper's Table 1 rows for the world and how the report words its column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pacplan.worlds.onnx_graph import Layout


@runtime_checkable
class PlannerExporter(Protocol):
    """A world that has a planner runtime (`pacplan_runtime`)."""

    net_dtype: str
    """The float type its network computes in (the runtime's `NET_DTYPE` entry)."""

    def fixed_parts(self, options: dict[str, Any]) -> dict[str, Any]:
        """What θ does not hold but the policy needs to act, as plain JSON values; refuses
        (PacplanError) options whose planner the runtime cannot fly."""
        ...

    def net_onnx(self, fixed: dict[str, Any]) -> bytes:
        """The network's ONNX bytes (weights as inputs) for these fixed parts."""
        ...

    def net_layout(self, fixed: dict[str, Any]) -> Layout:
        """The network's weight tensors, (name, shape), in the order of the flat θ."""
        ...

    def network_label(self, fixed: dict[str, Any]) -> str:
        """How a refusal names the network, e.g. "uav (policy conv, policy_width 8)"."""
        ...


PaperRow = tuple[str, float, "float | None"]
"""One N of the paper's Table 1: (the bound it used, the bound, the test cost it states)."""


@dataclass(frozen=True)
class PaperStory:
    """The paper's Table 1 for a world and how a report places a run beside it.

    rows: N -> `PaperRow`; needed_options: world options the paper's setting requires (absent
    ones take the world's default); note and column_head: functions of (options, papers_prior)
    giving the note under Table 1 and the paper column's heading."""

    rows: dict[int, PaperRow]
    note: Any
    column_head: Any
    needed_options: dict[str, Any] = field(default_factory=dict)

    def in_setting(self, options: dict[str, Any] | None) -> bool:
        """Whether world options keep the paper's setting (its robot, say)."""
        return all((options or {}).get(k, v) == v for k, v in self.needed_options.items())
