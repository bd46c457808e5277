"""Control flow in an ONNX model, read from its protobuf bytes alone: no `onnx` package (the
robot has only numpy and onnxruntime) and nothing of the model runs.

A policy needs no Loop, Scan or If, and a node holding a subgraph can run without end (a Loop
with no trip count once made `Planner.load` hang on a tampered planner), so both the runtime
and `pacplan certify-policy` refuse such a model before onnxruntime sees it.

Only the few fields on the way to each node are decoded (proto3 wire format, onnx.proto):
ModelProto.graph (7) and .functions (25); GraphProto.node (1); FunctionProto.name (1),
.node (7), .domain (10); NodeProto.name (3), .op_type (4), .attribute (5); AttributeProto.g (6),
.graphs (11), .type (20: GRAPH 5, GRAPHS 10). Everything else (the weights) is skipped by its
length, so a large model is scanned in milliseconds.
"""

from __future__ import annotations

from collections.abc import Iterator

CONTROL_FLOW = ("Loop", "Scan", "If")
"""Operators a policy does not need that can run without end (with any op holding a graph)."""

_GRAPH_TYPES = (5, 10)  # AttributeProto.AttributeType GRAPH, GRAPHS


class OnnxGraphError(ValueError):
    """The bytes are not a protobuf of the shape an ONNX model has."""


def _varint(data: memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise OnnxGraphError("truncated or malformed protobuf")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of each field: an int, or the bytes of a
    length-delimited field."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire == 2:
            size, pos = _varint(data, pos)
            if pos + size > len(data):
                raise OnnxGraphError("truncated or malformed protobuf")
            yield number, wire, data[pos:pos + size]
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
            if pos > len(data):
                raise OnnxGraphError("truncated or malformed protobuf")
        else:  # groups (3, 4) are not in onnx.proto; 6, 7 do not exist
            raise OnnxGraphError(f"protobuf wire type {wire} where ONNX has none")


def _text(value: int | memoryview) -> str:
    if isinstance(value, int):
        raise OnnxGraphError("a string field holds a number")
    return bytes(value).decode("utf-8", errors="replace")


def _sub(value: int | memoryview) -> memoryview:
    if isinstance(value, int):
        raise OnnxGraphError("a message field holds a number")
    return value


def _holds_graph(attribute: memoryview) -> bool:
    for number, _wire, value in _fields(attribute):
        if number in (6, 11) or (number == 20 and value in _GRAPH_TYPES):
            return True
    return False


def _node_flow(node: memoryview, index: int, where: str) -> str | None:
    name = op_type = ""
    subgraph = False
    for number, _wire, value in _fields(node):
        if number == 3:
            name = _text(value)
        elif number == 4:
            op_type = _text(value)
        elif number == 5:
            subgraph = subgraph or _holds_graph(_sub(value))
    if op_type in CONTROL_FLOW or subgraph:
        shown = repr(name) if name else f"#{index}"
        return (f"node {shown} ({op_type}) in its {where} is control flow (Loop, Scan, If or a "
                "subgraph)")
    return None


def _nodes_flow(nodes: list[memoryview], where: str) -> str | None:
    for i, node in enumerate(nodes):
        found = _node_flow(node, i, where)
        if found is not None:
            return found
    return None


def control_flow(data: bytes) -> str | None:
    """The first node of the model's graph or of its model-local functions that is control
    flow, described in words ("node 'spin' (Loop) in its graph is control flow …"); None when
    there is none. OnnxGraphError when the bytes are not a model's protobuf."""
    graphs: list[memoryview] = []
    functions: list[memoryview] = []
    for number, _wire, value in _fields(memoryview(data)):
        if number == 7:
            graphs.append(_sub(value))
        elif number == 25:
            functions.append(_sub(value))
    if not graphs:
        raise OnnxGraphError("no graph in it")
    for graph in graphs:
        found = _nodes_flow([_sub(v) for n, _w, v in _fields(graph) if n == 1], "graph")
        if found is not None:
            return found
    for function in functions:
        name = domain = ""
        nodes = []
        for number, _wire, value in _fields(function):
            if number == 1:
                name = _text(value)
            elif number == 10:
                domain = _text(value)
            elif number == 7:
                nodes.append(_sub(value))
        found = _nodes_flow(nodes, f"function {domain + '.' if domain else ''}{name}")
        if found is not None:
            return found
    return None


def refusal(data: bytes) -> str | None:
    """Why a policy model is refused before a session is made, as one sentence (control flow,
    or bytes that are not a model), else None: certify-policy and the runtime say the same."""
    try:
        found = control_flow(data)
    except OnnxGraphError as exc:
        return f"not a readable ONNX model ({exc})"
    if found is None:
        return None
    return f"{found}, which a policy does not need and which can run without end: refused"
