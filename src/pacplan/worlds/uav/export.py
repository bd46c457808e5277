"""The UAV planner as `pacplan export` writes it: fixed parts, ONNX network, weight layout.

Fixed parts: the Depth Filter cells, the primitive library, the camera, the observation
normalisation, net_scale, the tie-break order and, for a policy family other than the paper's
net, `policy` and `policy_width`; generated from the world's own constants, so `pacplan verify`
regenerates them and any edit to planner.json is named.

Networks: normalised depth (B, 1, 50, 50) float32 → Conv(1→2, k4, s2) → ELU → Conv(2→1, k2) →
ELU → fc 529→25 → ELU → fc 25→25 → tanh (`pacplan.worlds.uav.policy.ResidualNet`), in float32
like the batched simulator that certified it. The `conv` policy family
(`pacplan.worlds.uav.families`): Conv(1→width, k4, s2) → ELU → Conv(width→width2, k4, s2) →
ELU → fc features→128 → ELU → fc 128→25 → tanh (`conv_policy.ConvNet`), float32, its sizes
symbolic (width, width2 = 2·width, features = width2·11·11), so one graph serves every
policy_width and its sha256 is a constant the runtime knows.
"""

from __future__ import annotations

from typing import Any

from onnx import TensorProto, helper

from pacplan.errors import PacplanError
from pacplan.worlds.onnx_graph import Layout, model_bytes, weight_inputs
from pacplan_runtime.spec import NET_DTYPE

UAV_WEIGHTS: Layout = (("conv1.weight", (2, 1, 4, 4)), ("conv1.bias", (2,)),
                       ("conv2.weight", (1, 2, 2, 2)), ("conv2.bias", (1,)),
                       ("fc1.weight", (25, 529)), ("fc1.bias", (25,)),
                       ("fc2.weight", (25, 25)), ("fc2.bias", (25,)))
UAV_CONV_WEIGHTS: Layout = (("conv1.weight", ("width", 1, 4, 4)), ("conv1.bias", ("width",)),
                            ("conv2.weight", ("width2", "width", 4, 4)),
                            ("conv2.bias", ("width2",)),
                            ("fc1.weight", (128, "features")), ("fc1.bias", (128,)),
                            ("fc2.weight", (25, 128)), ("fc2.bias", (25,)))
"""The conv family's weight inputs in flat-θ order, width-dependent sizes by name."""


def _graph(name: str, weights: Layout, conv2_stride: int, conv2_kernel: int) -> bytes:
    """Both families' nets: Conv(k4, s2) → ELU → Conv → ELU → flatten → Gemm → ELU → Gemm →
    tanh; they differ only in the second convolution and the weight sizes."""
    f = TensorProto.FLOAT
    x = helper.make_tensor_value_info("x", f, ["batch", 1, 50, 50])
    y = helper.make_tensor_value_info("net", f, ["batch", 25])
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], strides=[2, 2],
                         kernel_shape=[4, 4]),
        helper.make_node("Elu", ["c1"], ["h1"], alpha=1.0),
        helper.make_node("Conv", ["h1", "conv2.weight", "conv2.bias"], ["c2"],
                         strides=[conv2_stride] * 2, kernel_shape=[conv2_kernel] * 2),
        helper.make_node("Elu", ["c2"], ["h2"], alpha=1.0),
        helper.make_node("Flatten", ["h2"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["l1"], transB=1),
        helper.make_node("Elu", ["l1"], ["h3"], alpha=1.0),
        helper.make_node("Gemm", ["h3", "fc2.weight", "fc2.bias"], ["l2"], transB=1),
        helper.make_node("Tanh", ["l2"], ["net"]),
    ]
    return model_bytes(helper.make_graph(nodes, name, [x, *weight_inputs(weights, f)], [y]))


def uav_net_onnx() -> bytes:
    """The UAV residual net (weights as inputs, named as in the torch state_dict)."""
    return _graph("pacplan_uav_residual_net", UAV_WEIGHTS, conv2_stride=1, conv2_kernel=2)


def uav_conv_net_onnx() -> bytes:
    """The UAV conv family's net (weights as inputs, sizes symbolic)."""
    return _graph("pacplan_uav_conv_net", UAV_CONV_WEIGHTS, conv2_stride=2, conv2_kernel=4)


def _paper_net(fixed: dict[str, Any]) -> bool:
    """A planner of the paper's net: its fixed parts name no other policy family."""
    return fixed.get("policy", "paper") == "paper"


class UAVExporter:
    """`pacplan.worlds.story.PlannerExporter` of the UAV world."""

    net_dtype = NET_DTYPE["uav"]

    def fixed_parts(self, options: dict[str, Any]) -> dict[str, Any]:
        from pacplan.worlds.uav import primitives, spec
        from pacplan.worlds.uav.world import UAVWorld

        world = UAVWorld(**options)
        if not world.use_net:
            raise PacplanError("this run certifies the Depth Filter alone (use_net: false); "
                               "its policies are all the same and there is nothing to export")
        return {
            "observation": "z-depth image (50, 50) float32 in metres, row 0 at the top, far "
                           "value where nothing is hit",
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

    def net_onnx(self, fixed: dict[str, Any]) -> bytes:
        return uav_net_onnx() if _paper_net(fixed) else uav_conv_net_onnx()

    def net_layout(self, fixed: dict[str, Any]) -> Layout:
        if _paper_net(fixed):
            return UAV_WEIGHTS
        from pacplan.worlds.uav.families import policy_family

        return policy_family(fixed["policy"], fixed.get("policy_width")).shapes

    def network_label(self, fixed: dict[str, Any]) -> str:
        if _paper_net(fixed):
            return "uav"
        return f"uav (policy {fixed['policy']}, policy_width {fixed.get('policy_width')})"


EXPORTER = UAVExporter()
