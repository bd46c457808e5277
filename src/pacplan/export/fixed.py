"""The fixed parts of a world's policy, as the planner directory records them.

What θ does not hold but the policy needs to act, written by the world's own exporter
(`pacplan.worlds.story.PlannerExporter`, named by its registry entry) from the world's own
constants, so `pacplan verify` regenerates them and any edit to planner.json is named.
"""

from __future__ import annotations

import json
from typing import Any

from pacplan.worlds.base import world_exporter


def fixed_parts(world: str, options: dict[str, Any]) -> dict[str, Any]:
    """The fixed parts of world `world` with `options`, as plain JSON values."""
    return json.loads(json.dumps(world_exporter(world).fixed_parts(options)))
