"""A Gymnasium world's planner as `pacplan export` writes it: fixed parts, network, layout.

Fixed parts: the policy family's sizes and its action rule (discrete argmax or the bounded
box's squash); a `module:factory` family is refused (the runtime knows only the networks
pacplan writes). Networks (`pacplan.worlds.from_gym.policies`), float64 like the world's policies:
observation (B, obs_dim) → `linear`: z = obs·Wᵀ + b; `mlp`: z = tanh(obs·W1ᵀ + b1)·W2ᵀ + b2.
The sizes are symbolic (obs_dim, hidden, actions), so one graph per family serves every
environment and its sha256 is a constant the runtime knows; the action rule runs in numpy.
"""

from __future__ import annotations

from typing import Any

from onnx import TensorProto, helper

from pacplan.errors import PacplanError
from pacplan.worlds.onnx_graph import Layout, model_bytes, weight_inputs
from pacplan_runtime.spec import NET_DTYPE

GYM_WEIGHTS: dict[str, Layout] = {
    "linear": (("w", ("actions", "obs_dim")), ("b", ("actions",))),
    "mlp": (("w1", ("hidden", "obs_dim")), ("b1", ("hidden",)),
            ("w2", ("actions", "hidden")), ("b2", ("actions",)))}
"""Each family's weight inputs in the order of its flat θ (`from_gym.policies`), sizes by name."""


def gym_net_onnx(family: str) -> bytes:
    """A built-in family's raw outputs z (weights as inputs, sizes symbolic), in float64."""
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
    inputs = [obs, *weight_inputs(GYM_WEIGHTS[family], d)]
    graph = helper.make_graph(nodes, f"pacplan_gym_{family}", inputs, [z])
    return model_bytes(graph)


class GymExporter:
    """`pacplan.worlds.story.PlannerExporter` of the `gym` world (built-in families)."""

    net_dtype = NET_DTYPE["gym"]

    def fixed_parts(self, options: dict[str, Any]) -> dict[str, Any]:
        from pacplan.worlds.from_gym.policies import BUILTIN_POLICIES
        from pacplan.worlds.from_gym.world import GymWorld

        world = GymWorld(**options)
        describe = getattr(world.policy_family(), "runtime_parts", None)
        if world.policy not in BUILTIN_POLICIES or describe is None:
            raise PacplanError(f"gym policy family {world.policy!r} cannot be exported: the "
                               f"runtime flies only the built-in families "
                               f"({', '.join(BUILTIN_POLICIES)})")
        parts = describe()
        return {
            **parts,
            "observation": "the observation flattened as the gym world flattens it (a Box "
                           "observation raveled, any other space by gymnasium.spaces.flatten), "
                           f"{parts['obs_dim']} numbers, taken as float64",
            "net_output": f"z, the family's {parts['actions']} raw outputs (float64)",
            "horizon_steps": world.horizon,
        }

    def net_onnx(self, fixed: dict[str, Any]) -> bytes:
        return gym_net_onnx(fixed["family"])

    def net_layout(self, fixed: dict[str, Any]) -> Layout:
        sizes = {key: fixed.get(key) for key in ("obs_dim", "hidden", "actions")}
        return tuple((name, tuple(int(sizes[dim]) for dim in shape))  # type: ignore[arg-type]
                     for name, shape in GYM_WEIGHTS[fixed["family"]])

    def network_label(self, fixed: dict[str, Any]) -> str:
        return "gym"


EXPORTER = GymExporter()
