"""Shared pieces of the policy networks' ONNX graphs, which each world writes node by node.

Why not `torch.onnx.export`: the quadruped policy is numpy (there is no torch module to trace),
and a hand-written graph has bytes that depend only on this code and the onnx version (no
tracer, no exporter version drift), so an export is byte-reproducible and its sha256 stable.
The weights are graph *inputs*, not initializers: one model describes the architecture and each
policy of the posterior's support is a set of tensors in weights.safetensors, so the runtime
swaps policies without rebuilding a session.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

OPSET = 17

Layout = tuple[tuple[str, tuple[int | str, ...]], ...]
"""A network's weight tensors, (name, shape), in the order of the flat policy θ."""


def weight_inputs(weights: Layout, dtype: int) -> list[onnx.ValueInfoProto]:
    """The graph inputs of a network's weights (sizes may be symbolic names)."""
    return [helper.make_tensor_value_info(n, dtype, list(s)) for n, s in weights]


def const(name: str, values: list[int] | np.ndarray) -> onnx.NodeProto:
    """A Constant node holding `values`."""
    arr = np.asarray(values)
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr, name))


def model_bytes(graph: onnx.GraphProto) -> bytes:
    """The checked model of `graph`, serialised deterministically."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="pacplan", producer_version="1")
    model.ir_version = 8  # readable by onnxruntime ≥ 1.14
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString(deterministic=True)
