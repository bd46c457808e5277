"""The policy networks as ONNX graphs, written node by node with `onnx.helper`.

Why not `torch.onnx.export`: the quadruped policy is numpy (there is no torch module to trace),
and a hand-written graph has bytes that depend only on this code and the onnx version (no
tracer, no exporter version drift), so an export is byte-reproducible and its sha256 stable.
The weights are graph *inputs*, not initializers: one model describes the architecture and each
policy of the posterior's support is a set of tensors in weights.safetensors, so the runtime
swaps policies without rebuilding a session.

UAV: normalised depth (B, 1, 50, 50) float32 → Conv(1→2, k4, s2) → ELU → Conv(2→1, k2) → ELU →
fc 529→25 → ELU → fc 25→25 → tanh (`pacplan.worlds.uav.policy.ResidualNet`), in float32 like
the batched simulator that certified it. The UAV's `conv` policy family
(`pacplan.worlds.uav.families`): Conv(1→width, k4, s2) → ELU → Conv(width→width2, k4, s2) →
ELU → fc features→128 → ELU → fc 128→25 → tanh (`conv_policy.ConvNet`), float32, its sizes
symbolic (width, width2 = 2·width, features = width2·11·11), so one graph serves every
policy_width and its sha256 is a constant the runtime knows.
Quadruped: depth (B, 50, 50) metres and proprio (B, 22), float64 like the numpy policy →
Conv(1→2, k5, s5) as a patch matmul → tanh → concat proprio → linear 222→4 → sigmoid written
as ½(1 + tanh(z/2)) (`pacplan.worlds.quadruped.policy.policy_output`).
Gym (`pacplan.worlds.gym_policies`), float64 like the world's policies: observation
(B, obs_dim) → `linear`: z = obs·Wᵀ + b; `mlp`: z = tanh(obs·W1ᵀ + b1)·W2ᵀ + b2. The sizes are
symbolic (obs_dim, hidden, actions), so one graph per family serves every environment and its
sha256 is a constant the runtime knows; the action rule (argmax, box squash) runs in numpy.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
UAV_WEIGHTS = (("conv1.weight", (2, 1, 4, 4)), ("conv1.bias", (2,)),
               ("conv2.weight", (1, 2, 2, 2)), ("conv2.bias", (1,)),
               ("fc1.weight", (25, 529)), ("fc1.bias", (25,)),
               ("fc2.weight", (25, 25)), ("fc2.bias", (25,)))
UAV_CONV_WEIGHTS = (("conv1.weight", ("width", 1, 4, 4)), ("conv1.bias", ("width",)),
                    ("conv2.weight", ("width2", "width", 4, 4)), ("conv2.bias", ("width2",)),
                    ("fc1.weight", (128, "features")), ("fc1.bias", (128,)),
                    ("fc2.weight", (25, 128)), ("fc2.bias", (25,)))
"""The conv family's weight inputs in flat-θ order, width-dependent sizes by name."""
QUADRUPED_WEIGHTS = (("conv_w", (2, 1, 5, 5)), ("conv_b", (2,)),
                     ("lin_w", (4, 222)), ("lin_b", (4,)))
GYM_WEIGHTS = {"linear": (("w", ("actions", "obs_dim")), ("b", ("actions",))),
               "mlp": (("w1", ("hidden", "obs_dim")), ("b1", ("hidden",)),
                       ("w2", ("actions", "hidden")), ("b2", ("actions",)))}
"""Each gym family's weight inputs in the order of its flat θ (`gym_policies`), sizes by name."""


def _inputs(weights: tuple[tuple[str, tuple[int | str, ...]], ...], dtype: int) -> list:
    return [helper.make_tensor_value_info(n, dtype, list(s)) for n, s in weights]


def _const(name: str, values: list[int] | np.ndarray) -> onnx.NodeProto:
    arr = np.asarray(values)
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr, name))


def _model(graph: onnx.GraphProto) -> bytes:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="pacplan", producer_version="1")
    model.ir_version = 8  # readable by onnxruntime ≥ 1.14
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString(deterministic=True)


def _uav_graph(name: str, weights: tuple, conv2_stride: int, conv2_kernel: int) -> bytes:
    """Both UAV families' nets: Conv(k4, s2) → ELU → Conv → ELU → flatten → Gemm → ELU → Gemm →
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
    return _model(helper.make_graph(nodes, name, [x, *_inputs(weights, f)], [y]))


def uav_net_onnx() -> bytes:
    """The UAV residual net (weights as inputs, named as in the torch state_dict)."""
    return _uav_graph("pacplan_uav_residual_net", UAV_WEIGHTS, conv2_stride=1, conv2_kernel=2)


def uav_conv_net_onnx() -> bytes:
    """The UAV conv family's net (weights as inputs, sizes symbolic)."""
    return _uav_graph("pacplan_uav_conv_net", UAV_CONV_WEIGHTS, conv2_stride=2, conv2_kernel=4)


def quadruped_net_onnx() -> bytes:
    """The quadruped policy η(depth, proprio) in float64 (weights as inputs)."""
    d = TensorProto.DOUBLE
    depth = helper.make_tensor_value_info("depth", d, ["batch", 50, 50])
    proprio = helper.make_tensor_value_info("proprio", d, ["batch", 22])
    eta = helper.make_tensor_value_info("eta", d, ["batch", 4])
    nodes = [
        _const("s_patch", [-1, 10, 5, 10, 5]), _const("s_rows", [-1, 100, 25]),
        _const("s_kernel", [2, 25]), _const("s_feat", [-1, 200]),
        _const("half", np.array(0.5)), _const("one", np.array(1.0)),
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
                              [depth, proprio, *_inputs(QUADRUPED_WEIGHTS, d)], [eta])
    return _model(graph)


def gym_net_onnx(family: str) -> bytes:
    """A built-in gym family's raw outputs z (weights as inputs, sizes symbolic), in float64."""
    d = TensorProto.DOUBLE
    obs = helper.make_tensor_value_info("obs", d, ["batch", "obs_dim"])
    z = helper.make_tensor_value_info("z", d, ["batch", "actions"])
    if family == "linear":
        nodes = [helper.make_node("Gemm", ["obs", "w", "b"], ["z"], transB=1)]
    elif family == "mlp":
        nodes = [helper.make_node("Gemm", ["obs", "w1", "b1"], ["l1"], transB=1),
                 helper.make_node("Tanh", ["l1"], ["h1"]),
                 helper.make_node("Gemm", ["h1", "w2", "b2"], ["z"], transB=1)]
    else:
        raise ValueError(f"no gym network for family {family!r}")
    inputs = [obs, *_inputs(GYM_WEIGHTS[family], d)]
    graph = helper.make_graph(nodes, f"pacplan_gym_{family}", inputs, [z])
    return _model(graph)
