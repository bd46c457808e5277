"""The quadruped planner as `pacplan export` writes it: fixed parts, ONNX network, layout.

Fixed parts: the observation layout, the camera, the gait map (the runtime's own constants,
`pacplan_runtime.spec.GAIT_MAP`, which `GaitParams.from_policy_output` computes; a test holds
the two together), the primitive's length and the horizon. Only the text world is exported:
the paper-code variant's clock and cost are a reproduction of the paper's code, not a robot's.

Network: depth (B, 50, 50) metres and proprio (B, 22), float64 like the numpy policy →
Conv(1→2, k5, s5) as a patch matmul → tanh → concat proprio → linear 222→4 → sigmoid written
as ½(1 + tanh(z/2)) (`pacplan.worlds.quadruped.policy.policy_output`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from pacplan.errors import PacplanError
from pacplan.worlds.onnx_graph import Layout, const, model_bytes, weight_inputs
from pacplan_runtime.spec import GAIT_MAP, NET_DTYPE

QUADRUPED_WEIGHTS: Layout = (("conv_w", (2, 1, 5, 5)), ("conv_b", (2,)),
                             ("lin_w", (4, 222)), ("lin_b", (4,)))


def quadruped_net_onnx() -> bytes:
    """The quadruped policy η(depth, proprio) in float64 (weights as inputs)."""
    d = TensorProto.DOUBLE
    depth = helper.make_tensor_value_info("depth", d, ["batch", 50, 50])
    proprio = helper.make_tensor_value_info("proprio", d, ["batch", 22])
    eta = helper.make_tensor_value_info("eta", d, ["batch", 4])
    nodes = [
        const("s_patch", [-1, 10, 5, 10, 5]), const("s_rows", [-1, 100, 25]),
        const("s_kernel", [2, 25]), const("s_feat", [-1, 200]),
        const("half", np.array(0.5)), const("one", np.array(1.0)),
        helper.make_node("Reshape", ["depth", "s_patch"], ["p5"]),
        helper.make_node("Transpose", ["p5"], ["pt"], perm=[0, 1, 3, 2, 4]),  # (B,i,j,k,l)
        helper.make_node("Reshape", ["pt", "s_rows"], ["patches"]),  # (B, 100, 25)
        helper.make_node("Reshape", ["conv_w", "s_kernel"], ["k2"]),
        helper.make_node("Transpose", ["k2"], ["kt"], perm=[1, 0]),  # (25, 2)
        helper.make_node("MatMul", ["patches", "kt"], ["conv"]),  # (B, 100, 2)
        helper.make_node("Add", ["conv", "conv_b"], ["convb"]),
        helper.make_node("Tanh", ["convb"], ["act"]),
        helper.make_node("Transpose", ["act"], ["chw"], perm=[0, 2, 1]),  # channel-major
        helper.make_node("Reshape", ["chw", "s_feat"], ["feat"]),
        helper.make_node("Concat", ["feat", "proprio"], ["xin"], axis=1),
        helper.make_node("Gemm", ["xin", "lin_w", "lin_b"], ["z"], transB=1),
        helper.make_node("Mul", ["z", "half"], ["zh"]),
        helper.make_node("Tanh", ["zh"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["t1"]),
        helper.make_node("Mul", ["t1", "half"], ["eta"]),
    ]
    graph = helper.make_graph(nodes, "pacplan_quadruped_policy",
                              [depth, proprio, *weight_inputs(QUADRUPED_WEIGHTS, d)], [eta])
    return model_bytes(graph)


class QuadrupedExporter:
    """`pacplan.worlds.story.PlannerExporter` of the quadruped world (its text variant)."""

    net_dtype = NET_DTYPE["quadruped"]

    def fixed_parts(self, options: dict[str, Any]) -> dict[str, Any]:
        from pacplan.worlds.quadruped.policy import IMAGE_SIZE, N_PROPRIO
        from pacplan.worlds.quadruped.world import QuadrupedWorld

        world = QuadrupedWorld(**options)
        if world.variant != "text":
            raise PacplanError(f"export describes the text quadruped world's deployment; "
                               f"variant {world.variant!r} (the paper's code's clock and "
                               "cost) is not exported")
        amplitude, omega = GAIT_MAP["amplitude"], GAIT_MAP["omega"]
        return {
            "observation": {"depth": "(50, 50) float32 z-depth in metres from the torso "
                                     "camera, clipped to [0.01, far_m]",
                            "proprio": "(22,) float32 as MinitaurSim.proprioception returns "
                                       "it"},
            "image_size": IMAGE_SIZE, "n_proprio": N_PROPRIO, "far_m": world.camera.far_m,
            "camera": asdict(world.camera),
            "gait_map": {"amplitude": list(amplitude), "omega": list(omega),
                         "formula": "η rounded to float32 and clipped to [0, 1]; a1 = 0.8 η1 + "
                                    "0.2, a2 = 0.8 η2 + 0.2, ω = 20 η3 + 20 rad/s, "
                                    "a_st = min(η4, 1 − a1, 1 − a2)"},
            "primitive_s": world.rollout_config.primitive_s,
            "horizon_primitives": world.rollout_config.max_primitives,
        }

    def net_onnx(self, fixed: dict[str, Any]) -> bytes:
        return quadruped_net_onnx()

    def net_layout(self, fixed: dict[str, Any]) -> Layout:
        return QUADRUPED_WEIGHTS

    def network_label(self, fixed: dict[str, Any]) -> str:
        return "quadruped"


EXPORTER = QuadrupedExporter()
