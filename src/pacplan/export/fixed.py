"""The fixed parts of each world's policy, as the planner directory records them.

What θ does not hold but the policy needs to act: for the UAV the Depth Filter cells, the
primitive library, the camera, the observation normalisation, net_scale, the tie-break order
and, for a policy family other than the paper's net, `policy` and `policy_width`; for the
quadruped the observation layout and the gait map; for a `gym` world the policy family's sizes
and its action rule (discrete argmax or the bounded box's squash). Generated from the worlds'
own constants, so `pacplan verify` regenerates them and any edit to planner.json is named.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from pacplan.errors import PacplanError

GAIT_AMPLITUDE = (0.8, 0.2)  # a1, a2 = 0.8 η + 0.2 (GaitParams.from_policy_output)
GAIT_OMEGA = (20.0, 20.0)  # ω = 20 η3 + 20 rad/s


def fixed_parts(world: str, options: dict[str, Any]) -> dict[str, Any]:
    """The fixed parts of world `world` with `options`, as plain JSON values."""
    if world == "uav":
        parts = _uav(options)
    elif world == "quadruped":
        parts = _quadruped(options)
    elif world == "gym":
        parts = _gym(options)
    else:
        raise PacplanError(f"world {world!r} cannot be exported: only uav, quadruped and gym "
                           "planners have a runtime")
    return json.loads(json.dumps(parts))


def _uav(options: dict[str, Any]) -> dict[str, Any]:
    from pacplan.worlds.uav import primitives, spec
    from pacplan.worlds.uav.world import UAVWorld

    world = UAVWorld(**options)
    if not world.use_net:
        raise PacplanError("this run certifies the Depth Filter alone (use_net: false); its "
                           "policies are all the same and there is nothing to export")
    return {
        "observation": "z-depth image (50, 50) float32 in metres, row 0 at the top, far value "
                       "where nothing is hit",
        "image_size": spec.IMG, "far_m": spec.FAR,
        "net_input": "depth / far_m as (1, 1, 50, 50) float32",
        "net_scale": world.net_scale,
        "score": "mean depth of the primitive's cell + net_scale * net output; the highest "
                 "score is flown, ties to the earliest primitive in tie_break_order",
        "cell_size": spec.CELL, "filter_cells": spec.filter_cells().tolist(),
        "tie_break_order": spec.tie_break_order().tolist(),
        "camera": {"fov_deg": spec.FOV_DEG, "focal_px": spec.focal_px(),
                   "offset_m": list(spec.CAM_OFFSET), "pitch_down_deg": spec.CAM_PITCH_DEG,
                   "sample_offset_px": [spec.SAMPLE_ROW_OFFSET, spec.SAMPLE_COL_OFFSET]},
        "primitives": {
            "index": "5 * ix + iz over offsets (-1, -0.5, 0, 0.5, 1) m (x lateral, z up)",
            "offsets_m": spec.primitive_offsets().tolist(),
            "forward_speed_mps": spec.SPEED, "duration_s": spec.PRIM_DURATION,
            "sigmoid_gain": spec.SIGMOID_GAIN,
            "check_times_s": primitives.check_times().tolist(),
            "check_displacements_m": primitives.check_displacements().tolist(),
        },
        "horizon_primitives": spec.N_STEPS,
        # the paper's net writes nothing here, so its planners keep their bytes
        **({} if world.family.is_paper else world.family.options()),
    }


def _quadruped(options: dict[str, Any]) -> dict[str, Any]:
    from pacplan.worlds.quadruped.policy import IMAGE_SIZE, N_PROPRIO
    from pacplan.worlds.quadruped.world import QuadrupedWorld

    world = QuadrupedWorld(**options)
    if world.variant != "text":
        raise PacplanError(f"export describes the text quadruped world's deployment; variant "
                           f"{world.variant!r} (the paper's code's clock and cost) is not "
                           "exported")
    return {
        "observation": {"depth": "(50, 50) float32 z-depth in metres from the torso camera, "
                                 "clipped to [0.01, far_m]",
                        "proprio": "(22,) float32 as MinitaurSim.proprioception returns it"},
        "image_size": IMAGE_SIZE, "n_proprio": N_PROPRIO, "far_m": world.camera.far_m,
        "camera": asdict(world.camera),
        "gait_map": {"amplitude": list(GAIT_AMPLITUDE), "omega": list(GAIT_OMEGA),
                     "formula": "η rounded to float32 and clipped to [0, 1]; a1 = 0.8 η1 + 0.2, "
                                "a2 = 0.8 η2 + 0.2, ω = 20 η3 + 20 rad/s, "
                                "a_st = min(η4, 1 − a1, 1 − a2)"},
        "primitive_s": world.rollout_config.primitive_s,
        "horizon_primitives": world.rollout_config.max_primitives,
    }


def _gym(options: dict[str, Any]) -> dict[str, Any]:
    """A built-in policy family's sizes and action rule; a `module:factory` family is refused
    (the runtime knows only the networks pacplan writes)."""
    from pacplan.worlds.gym_policies import BUILTIN_POLICIES
    from pacplan.worlds.gym_world import GymWorld

    world = GymWorld(**options)
    describe = getattr(world.policy_family(), "runtime_parts", None)
    if world.policy not in BUILTIN_POLICIES or describe is None:
        raise PacplanError(f"gym policy family {world.policy!r} cannot be exported: the runtime "
                           f"flies only the built-in families ({', '.join(BUILTIN_POLICIES)})")
    parts = describe()
    return {
        **parts,
        "observation": "the observation flattened as the gym world flattens it (a Box "
                       "observation raveled, any other space by gymnasium.spaces.flatten), "
                       f"{parts['obs_dim']} numbers, taken as float64",
        "net_output": f"z, the family's {parts['actions']} raw outputs (float64)",
        "horizon_steps": world.horizon,
    }
