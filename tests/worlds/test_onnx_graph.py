"""The runtime's own protobuf reader (`pacplan_runtime.onnx_graph`) finds control flow as the
`onnx` package reads it: the oracle walks `onnx.load_model_from_string`'s graph and functions
for Loop, Scan, If or any attribute holding a graph, on models drawn by hypothesis; and bytes
that are not a model give an OnnxGraphError, never another exception or a hang."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pacplan_runtime.onnx_graph import CONTROL_FLOW, OnnxGraphError, control_flow

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

onnx = pytest.importorskip("onnx")
helper, T = onnx.helper, onnx.TensorProto

PLAIN = ("Relu", "Tanh", "Identity", "Sigmoid", "Neg")


def _oracle(data: bytes) -> str | None:
    """The first control-flow node as the `onnx` package reads the model: its words."""
    model = onnx.load_model_from_string(data)
    places = [("graph", model.graph.node)]
    places += [(f"function {f.domain + '.' if f.domain else ''}{f.name}", f.node)
               for f in model.functions]
    for where, nodes in places:
        for i, node in enumerate(nodes):
            sub = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                      for a in node.attribute)
            if node.op_type in CONTROL_FLOW or sub:
                shown = repr(node.name) if node.name else f"#{i}"
                return (f"node {shown} ({node.op_type}) in its {where} is control flow (Loop, "
                        "Scan, If or a subgraph)")
    return None


_BRANCH = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "b", [],
                            [helper.make_tensor_value_info("y", T.FLOAT, None)])


@st.composite
def _node(draw: st.DrawFn, index: int) -> object:
    kind = draw(st.sampled_from(PLAIN + CONTROL_FLOW + ("Custom-with-graph",
                                                        "Custom-with-graphs", "Custom")))
    name = draw(st.sampled_from(["", f"n{index}", "spin"]))
    attrs = {"alpha": draw(st.floats(-2, 2)), "sizes": draw(st.lists(st.integers(0, 9), min_size=1,
                                                                     max_size=3))}
    if kind == "If":
        attrs.update(then_branch=_BRANCH, else_branch=_BRANCH)
    elif kind in ("Loop", "Scan", "Custom-with-graph"):
        attrs["body"] = _BRANCH
    elif kind == "Custom-with-graphs":
        attrs["bodies"] = [_BRANCH, _BRANCH]
    op = kind.split("-")[0]
    return helper.make_node(op, [f"v{index}"], [f"v{index + 1}"], name=name,
                            domain="" if op in PLAIN + CONTROL_FLOW else "user", **attrs)


@st.composite
def _model(draw: st.DrawFn) -> bytes:
    n = draw(st.integers(0, 6))
    nodes = [draw(_node(i)) for i in range(n)]
    weights = onnx.numpy_helper.from_array(
        np.arange(draw(st.integers(0, 3000)), dtype=np.float32), "w")
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("v0", T.FLOAT, None)],
                              [helper.make_tensor_value_info(f"v{n}", T.FLOAT, None)],
                              [weights])
    functions = []
    for f in range(draw(st.integers(0, 2))):
        body = [draw(_node(i)) for i in range(draw(st.integers(0, 3)))]
        functions.append(helper.make_function(draw(st.sampled_from(["", "fns"])), f"F{f}",
                                              ["v0"], ["v1"], body,
                                              [helper.make_opsetid("", 17)]))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              functions=functions)
    return model.SerializeToString()


@given(_model())
def test_control_flow_is_found_as_the_onnx_package_reads_it(data: bytes) -> None:
    assert control_flow(data) == _oracle(data)


@given(st.binary(max_size=200))
def test_bytes_that_are_not_a_model_are_one_error(data: bytes) -> None:
    """Either an answer or an OnnxGraphError: any other exception fails the test."""
    with contextlib.suppress(OnnxGraphError):
        control_flow(data)


def test_a_truncated_model_is_refused() -> None:
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, None)],
        [helper.make_tensor_value_info("y", T.FLOAT, None)]))
    data = model.SerializeToString()
    assert control_flow(data) is None
    with pytest.raises(OnnxGraphError, match="truncated"):
        control_flow(data[:-3])
    with pytest.raises(OnnxGraphError, match="no graph"):
        control_flow(b"")
