"""A Stable-Baselines3 MLP policy, read without unpickling, written as an ONNX graph.

The robot runs certified policies with onnxruntime alone, so an SB3 `.zip` is converted once,
at export, into a graph that computes SB3's deterministic action path in float32, op for op as
the pickle-free reader (`pacplan.policy_certification.stable_baselines`) computes it with torch:
Linear layers (`Gemm`, weights as initializers) with the policy's activation between them,
then, per algorithm:

- PPO/A2C on a `Discrete` space: the Categorical's probabilities, softmax(z − logsumexp z), as
  SB3 takes them; DQN: the Q-values. The runtime takes start + argmax (the first maximum);
- PPO/A2C on a `Box`: the Gaussian's mean; the runtime clips it to the box;
- SAC and TD3: tanh of the actor's output rescaled to the box, low + ½(t + 1)(high − low), in
  float32 as SB3's `unscale_action` does it in numpy; the runtime's clip changes nothing there.

That is the I/O convention of an `.onnx` policy (`pacplan.policy_certification.onnx_file`): input a
float32 batch of flattened observations, output n scores or the box action. Written with
`onnx.helper` (no tracer), so the bytes depend only on the weights, this code and the onnx
version: `pacplan verify` converts the shipped zip again and compares bytes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from gymnasium import spaces
from onnx import TensorProto, helper, numpy_helper

from pacplan.errors import PacplanError

OPSET = 17
INPUT, OUTPUT = "obs", "action_scores"


def _elementwise(op: str, **attrs: Any) -> Any:
    """One ONNX op applied to x (torch's default arguments as its attributes)."""
    return lambda x, y, nodes, c: nodes.append(helper.make_node(op, [x], [y], **attrs))


def _clip(low: float, high: float) -> Any:
    def build(x: str, y: str, nodes: list, c: Any) -> None:
        nodes.append(helper.make_node("Clip", [x, c(np.float32(low)), c(np.float32(high))], [y]))
    return build


def _silu(x: str, y: str, nodes: list, c: Any) -> None:
    nodes += [helper.make_node("Sigmoid", [x], [f"{y}_s"]),
              helper.make_node("Mul", [x, f"{y}_s"], [y])]


def _gelu(x: str, y: str, nodes: list, c: Any) -> None:
    """torch's exact GELU: x · ½ (1 + erf(x / √2))."""
    nodes += [helper.make_node("Mul", [x, c(np.float32(1 / np.sqrt(2)))], [f"{y}_a"]),
              helper.make_node("Erf", [f"{y}_a"], [f"{y}_e"]),
              helper.make_node("Add", [f"{y}_e", c(np.float32(1))], [f"{y}_p"]),
              helper.make_node("Mul", [x, f"{y}_p"], [f"{y}_m"]),
              helper.make_node("Mul", [f"{y}_m", c(np.float32(0.5))], [y])]


def _mish(x: str, y: str, nodes: list, c: Any) -> None:
    nodes += [helper.make_node("Softplus", [x], [f"{y}_sp"]),
              helper.make_node("Tanh", [f"{y}_sp"], [f"{y}_t"]),
              helper.make_node("Mul", [x, f"{y}_t"], [y])]


def _identity(x: str, y: str, nodes: list, c: Any) -> None:
    nodes.append(helper.make_node("Identity", [x], [y]))


ACTIVATIONS = {
    "Tanh": _elementwise("Tanh"), "ReLU": _elementwise("Relu"),
    "Sigmoid": _elementwise("Sigmoid"), "ELU": _elementwise("Elu", alpha=1.0),
    "LeakyReLU": _elementwise("LeakyRelu", alpha=0.01), "SELU": _elementwise("Selu"),
    "CELU": _elementwise("Celu", alpha=1.0), "Softplus": _elementwise("Softplus"),
    "Hardtanh": _clip(-1.0, 1.0), "ReLU6": _clip(0.0, 6.0), "SiLU": _silu, "GELU": _gelu,
    "Mish": _mish, "Identity": _identity,
}
"""torch.nn activations (default arguments, as SB3 builds them) as ONNX nodes."""


class _Graph:
    """Nodes and float32 initializers under names made here, in order (deterministic bytes)."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.init: list[onnx.TensorProto] = []

    def const(self, value: Any) -> str:
        name = f"c{len(self.init)}"
        self.init.append(numpy_helper.from_array(np.asarray(value, dtype=np.float32), name))
        return name

    def linear(self, x: str, layer: Any, y: str) -> None:
        w, b = self.const(layer.weight.numpy()), self.const(layer.bias.numpy())
        self.nodes.append(helper.make_node("Gemm", [x, w, b], [y], transB=1))


def sb3_onnx(policy: Any, obs_dim: int, action_space: spaces.Space) -> bytes:
    """The ONNX bytes of `policy` (a `pacplan.policy_certification.stable_baselines.SB3Policy`) for
    flattened observations of size `obs_dim` and this action space."""
    act = ACTIVATIONS.get(policy.activation)
    if act is None:
        raise PacplanError(f"{policy.label}: activation {policy.activation} has no ONNX "
                           "export here; export the policy to .onnx yourself and certify that")
    g, x = _Graph(), INPUT
    last = len(policy.hidden) - 1
    for i, layer in enumerate(policy.hidden):
        g.linear(x, layer, f"l{i}")
        x = f"l{i}"
        if policy.algorithm != "dqn" or i < last:  # DQN's q_net ends in a plain Linear
            act(x, f"h{i}", g.nodes, g.const)
            x = f"h{i}"
    if policy.head is not None:
        g.linear(x, policy.head, "z")
        x = "z"
    _output(g, x, policy.algorithm, action_space)
    n_out = (int(action_space.n) if isinstance(action_space, spaces.Discrete)
             else int(np.prod(action_space.shape)))
    graph = helper.make_graph(
        g.nodes, "pacplan_sb3_policy",
        [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, ["batch", obs_dim])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, ["batch", n_out])],
        initializer=g.init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="pacplan", producer_version="1")
    model.ir_version = 8  # readable by onnxruntime ≥ 1.14
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString(deterministic=True)


def _output(g: _Graph, z: str, algorithm: str, space: spaces.Space) -> None:
    """The last nodes: what the ONNX convention's runtime turns into SB3's action."""
    nodes = g.nodes
    if isinstance(space, spaces.Discrete) and algorithm != "dqn":
        nodes += [helper.make_node("ReduceLogSumExp", [z], ["lse"], axes=[-1], keepdims=1),
                  helper.make_node("Sub", [z, "lse"], ["logp"]),
                  helper.make_node("Softmax", ["logp"], [OUTPUT], axis=-1)]
    elif isinstance(space, spaces.Box) and algorithm in ("sac", "td3"):
        low = np.asarray(space.low, dtype=np.float32).reshape(-1)
        span = (np.asarray(space.high, dtype=np.float32).reshape(-1) - low).astype(np.float32)
        nodes += [helper.make_node("Tanh", [z], ["t"]),
                  helper.make_node("Add", ["t", g.const(np.float32(1.0))], ["t1"]),
                  helper.make_node("Mul", [g.const(np.float32(0.5)), "t1"], ["t2"]),
                  helper.make_node("Mul", ["t2", g.const(span)], ["t3"]),
                  helper.make_node("Add", [g.const(low), "t3"], [OUTPUT])]
    else:
        nodes.append(helper.make_node("Identity", [z], [OUTPUT]))
