"""What `Planner.load` checks beyond the manifest's hashes: the cheap things that make a planner
safe to fly even when someone re-hashed manifest.json.

A re-hashed manifest proves nothing, so load holds planner.json, the net and the weights to
what pacplan writes, as far as that is cheap and needs no run evidence: the probabilities are a
distribution over a support of distinct policies, the net is one of the networks pacplan
exports (its sha256 is known here; a gym world's is its built-in policy family's, a UAV's its
policy family's: the paper's net or conv of a known width), the weights are finite float32
tensors of exactly the net's shapes, one set per policy, and the fixed parts have the types,
shapes and ranges the decision code indexes with. Only `pacplan verify` ties
them to the certificate (that these are the certified probabilities, policies and fixed parts);
docs/verify.md says which is which.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from pacplan_runtime.bundle import PLANNER_FORMAT, PlannerError

GYM_NET_SHA256 = {
    "linear": {"3b710f522cda2bf68b562c25c24db40f544e789011a93078b0f1e1748d33b1fe"},
    "mlp": {"6b7cd3b833037f573e2a8f24253d02e7129fb36694e7c6e369a75b66aaa0da18"},
}
"""sha256 of each built-in gym policy family's net.onnx (sizes symbolic, so one per family);
a family not listed here (a user's `module:factory`) has no runtime and is refused."""
UAV_NET_SHA256 = {
    "paper": {"446b9abe799934ec0dc983aed54f9a85dc5a2779754567da8adf01ed58d7eb73"},
    "conv": {"5618c9696069b3b101c370d4ebb2231c73e8d716ae5ef6a931d9c694a2bbd585"},
}
"""sha256 of each UAV policy family's net.onnx (the conv family's sizes are symbolic, so one
per family); fixed.policy names the family (absent: the paper's net). Any other is refused."""
UAV_CONV_WIDTHS = (1, 2, 4, 8, 16)  # the conv family's policy_width values
UAV_CONV_DEFAULT_WIDTH = 4  # UAVWorld's default policy_width of the conv family
NET_SHA256 = {
    "uav": set().union(*UAV_NET_SHA256.values()),
    "quadruped": {"62133773094a8696fe4db36917269194193a25c762a8e91ec69cc0c184e728b2"},
    "gym": set().union(*GYM_NET_SHA256.values()),
}
"""sha256 of each world's net.onnx as pacplan exports it (tests/test_planner_dir.py checks
these against each world's exporter, `pacplan.worlds.*export`; a new onnx serialization adds
a hash here)."""
FIXED_SHA256 = {
    "uav": {"f3e144156f471a14f44ee8ec9b65ebae25cbd8348c762fa8a1d9e1d63de5c8bd"},
}
"""sha256 of the UAV's fixed parts but net_scale, policy and policy_width (canonical JSON): the
Depth Filter cells, the primitive library, the camera, far_m and the tie-break order are
constants of the UAV world, so a re-hashed planner.json that moves a primitive is refused by
load (tests check these against `pacplan.export.fixed`)."""
UAV_NET_SCALE = 5.0  # UAVWorld's default; a run may set world.options.net_scale
GYM_HIDDEN = 16  # GymWorld's default hidden units of the mlp family
GAIT_MAP = {"amplitude": [0.8, 0.2], "omega": [20.0, 20.0]}  # the runtime's gait formula
NET_DTYPE = {"uav": "float32", "quadruped": "float64", "gym": "float64"}
OBSERVATION_INPUTS = {"uav": ("x",), "quadruped": ("depth", "proprio"), "gym": ("obs",)}
GYM_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8",
              "uint16", "uint32", "uint64")
"""The numpy dtypes a gym Box action may have (the action is cast to it)."""
_MAX_SIZE = 1 << 24  # a gym network's sizes: far above any policy, small enough to allocate
_SUM_TOL = 1e-9  # |Σp − 1|, as verify allows


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) \
        and math.isfinite(value)


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Spec:
    """planner.json read field by field; a missing or mistyped field is one PlannerError."""

    def __init__(self, data: dict[str, Any], where: Path) -> None:
        self.data, self.where = data, where

    def fail(self, field: str, rule: str) -> PlannerError:
        return PlannerError(f"{self.where}: field {field} must be {rule}")

    def get(self, field: str, kind: type | tuple[type, ...], rule: str) -> Any:
        value: Any = self.data
        for key in field.split("."):
            if not isinstance(value, dict) or key not in value:
                raise self.fail(field, rule + " (it is missing)")
            value = value[key]
        if not isinstance(value, kind) or isinstance(value, bool):  # true is not 1
            raise self.fail(field, rule)
        return value

    def number(self, field: str, low: float, high: float, rule: str) -> float:
        value = self.get(field, (int, float), rule)
        if not _number(value) or not low <= value <= high:
            raise self.fail(field, rule)
        return float(value)

    def array(self, field: str, shape: tuple[int | None, ...], rule: str,
              integer: bool = False) -> np.ndarray:
        raw = self.get(field, list, rule)
        try:
            arr = np.asarray(raw, dtype=object)
        except ValueError:
            raise self.fail(field, rule) from None
        ok = arr.ndim == len(shape) and all(s is None or s == n for s, n in zip(shape, arr.shape))
        check = _integer if integer else _number
        if not ok or not all(check(v) for v in arr.reshape(-1)):
            raise self.fail(field, rule)
        return arr.astype(np.int64 if integer else np.float64)


def check_spec(data: dict[str, Any], where: Path, fixed: bool = True) -> dict[str, Any]:
    """planner.json, checked: format, world, posterior, certified cost, net and fixed parts
    (their values too with `fixed`; `verify` compares them key by key itself). Returns it
    unchanged; every problem is one PlannerError naming the field."""
    spec = _Spec(data, where)
    if data.get("format") != PLANNER_FORMAT:
        raise spec.fail("format", repr(PLANNER_FORMAT))
    world = spec.get("world.name", str, f"one of {', '.join(NET_SHA256)}")
    if world not in NET_SHA256:
        raise spec.fail("world.name", f"one of {', '.join(NET_SHA256)}")
    spec.get("world.options", dict, "an object")
    spec.number("certified_cost", 0.0, 1.0, "a number in [0, 1]")
    delta = spec.number("delta", 0.0, 1.0, "a number in (0, 1)")
    if delta in (0.0, 1.0):
        raise spec.fail("delta", "a number in (0, 1)")
    _check_posterior(spec)
    for key in ("onnx", "weights"):
        spec.get(f"net.{key}", str, "a file name in the planner directory")
    if spec.get("net.dtype", str, f"{NET_DTYPE[world]!r}") != NET_DTYPE[world]:
        raise spec.fail("net.dtype", f"{NET_DTYPE[world]!r} for the {world} network")
    spec.get("fixed", dict, "an object")
    {"uav": _check_uav, "quadruped": _check_quadruped, "gym": _check_gym}[world](spec)
    if fixed:
        check_fixed(data, where)
    return data


def _check_posterior(spec: _Spec) -> None:
    """The support is distinct policy indices; p a distribution over it, every entry > 0."""
    index = spec.array("posterior.policy_index", (None,), "a non-empty list of distinct "
                       "policy indices ≥ 0", integer=True)
    if index.size == 0 or (index < 0).any() or len(set(index.tolist())) != index.size:
        raise spec.fail("posterior.policy_index", "a non-empty list of distinct policy "
                        "indices ≥ 0")
    p = spec.array("posterior.probability", (index.size,), f"a list of {index.size} numbers "
                   "in (0, 1], one per policy of the support")
    if (p <= 0.0).any() or (p > 1.0).any():
        raise spec.fail("posterior.probability", "a list of numbers in (0, 1] (the support "
                        "holds the policies with p > 0)")
    if abs(math.fsum(p.tolist()) - 1.0) > _SUM_TOL:
        raise spec.fail("posterior.probability", f"a distribution: it sums to "
                        f"{math.fsum(p.tolist())!r}, not 1")


def _check_uav(spec: _Spec) -> None:
    """The fixed parts the UAV decision indexes with, in range (shapes match the net's 25
    outputs and 50 × 50 input)."""
    size = spec.get("fixed.image_size", int, "50 (the net's input is 50 × 50)")
    if size != 50:
        raise spec.fail("fixed.image_size", "50 (the net's input is 50 × 50)")
    spec.number("fixed.far_m", 1e-6, 1e6, "a positive number of metres")
    spec.number("fixed.net_scale", -1e6, 1e6, "a finite number")
    cell = spec.get("fixed.cell_size", int, "an integer in [1, 50]")
    if not 1 <= cell <= size:
        raise spec.fail("fixed.cell_size", "an integer in [1, 50]")
    n_prim = 25
    cells = spec.array("fixed.filter_cells", (n_prim, 2), f"{n_prim} [row, column] pairs, "
                       "each cell inside the image", integer=True)
    if (cells < 0).any() or (cells + cell > size).any():
        raise spec.fail("fixed.filter_cells", f"{n_prim} [row, column] pairs with each "
                        f"{cell} × {cell} cell inside the {size} × {size} image")
    order = spec.array("fixed.tie_break_order", (n_prim,), f"a permutation of 0 … {n_prim - 1}",
                       integer=True)
    if sorted(order.tolist()) != list(range(n_prim)):
        raise spec.fail("fixed.tie_break_order", f"a permutation of 0 … {n_prim - 1}")
    spec.array("fixed.primitives.offsets_m", (n_prim, 2), f"{n_prim} finite (dx, dz) pairs")
    spec.number("fixed.primitives.duration_s", 1e-6, 1e6, "a positive number of seconds")
    times = spec.array("fixed.primitives.check_times_s", (None,), "a list of finite times")
    spec.array("fixed.primitives.check_displacements_m", (n_prim, times.size, None),
               f"{n_prim} lists of finite positions, one per check time")
    _check_uav_policy(spec)


def _check_uav_policy(spec: _Spec) -> None:
    """A UAV policy family the runtime flies (fixed.policy; absent: the paper's net) and, for
    the conv family, one of its sizes (fixed.policy_width)."""
    fixed = spec.data["fixed"]
    families = ", ".join(UAV_NET_SHA256)
    if "policy" not in fixed:
        if "policy_width" in fixed:
            raise spec.fail("fixed.policy_width", "absent without fixed.policy (the paper's "
                            "net has one size)")
        return
    policy = spec.get("fixed.policy", str, f"one of {families}")
    if policy not in UAV_NET_SHA256:
        raise spec.fail("fixed.policy", f"one of {families} (the runtime flies only these UAV "
                        f"policy families, not {policy!r})")
    widths = ", ".join(str(w) for w in UAV_CONV_WIDTHS)
    if policy == "conv":
        width = spec.get("fixed.policy_width", int, f"one of {widths}")
        if width not in UAV_CONV_WIDTHS:
            raise spec.fail("fixed.policy_width", f"one of {widths} (the conv family's sizes), "
                            f"not {width!r}")
    elif "policy_width" in fixed:
        raise spec.fail("fixed.policy_width", f"absent for policy {policy}")


def uav_net_sizes(fixed: dict[str, Any]) -> dict[str, int]:
    """The named sizes of the UAV conv family's net inputs (none for the paper's net)."""
    if fixed.get("policy", "paper") != "conv":
        return {}
    width = int(fixed["policy_width"])
    return {"width": width, "width2": 2 * width, "features": 2 * width * 11 * 11}


def _check_quadruped(spec: _Spec) -> None:
    """The observation layout matches the net; the gait map keeps amplitudes in [0, 1] and
    the frequency finite and ≥ 0 for every η in [0, 1]."""
    if spec.get("fixed.image_size", int, "50 (the net's depth input)") != 50:
        raise spec.fail("fixed.image_size", "50 (the net's depth input is 50 × 50)")
    if spec.get("fixed.n_proprio", int, "22 (the net's proprio input)") != 22:
        raise spec.fail("fixed.n_proprio", "22 (the net's proprio input)")
    spec.number("fixed.primitive_s", 1e-6, 1e6, "a positive number of seconds")
    gain, offset = spec.array("fixed.gait_map.amplitude", (2,), "[gain, offset]").tolist()
    if not (0.0 <= offset <= 1.0 and 0.0 <= gain + offset <= 1.0):
        raise spec.fail("fixed.gait_map.amplitude", "[gain, offset] with amplitudes "
                        "gain·η + offset in [0, 1] for η in [0, 1]")
    gain, offset = spec.array("fixed.gait_map.omega", (2,), "[gain, offset]").tolist()
    if not (0.0 <= offset <= 1e3 and 0.0 <= gain + offset <= 1e3):
        raise spec.fail("fixed.gait_map.omega", "[gain, offset] with ω = gain·η + offset in "
                        "[0, 1000] rad/s for η in [0, 1]")


def _size(spec: _Spec, field: str) -> int:
    value = spec.get(field, int, f"an integer in [1, {_MAX_SIZE}]")
    if not 1 <= value <= _MAX_SIZE:
        raise spec.fail(field, f"an integer in [1, {_MAX_SIZE}]")
    return int(value)


def _check_gym(spec: _Spec) -> None:
    """A built-in family (linear or mlp) with its sizes, and an action rule the decision code
    applies: a discrete argmax over `actions` outputs, or a finite box of `actions` numbers."""
    family = spec.get("fixed.family", str, f"one of {', '.join(GYM_NET_SHA256)}")
    if family not in GYM_NET_SHA256:
        raise spec.fail("fixed.family", f"one of {', '.join(GYM_NET_SHA256)} (the runtime "
                        f"flies only pacplan's built-in families, not {family!r})")
    _size(spec, "fixed.obs_dim")
    actions = _size(spec, "fixed.actions")
    if family == "mlp":
        _size(spec, "fixed.hidden")
    kind = spec.get("fixed.action.space", str, "'discrete' or 'box'")
    if kind == "discrete":
        if spec.get("fixed.action.n", int, f"{actions} (fixed.actions)") != actions:
            raise spec.fail("fixed.action.n", f"{actions} (fixed.actions)")
        spec.get("fixed.action.start", int, "an integer")
    elif kind == "box":
        low = spec.array("fixed.action.low", (actions,), f"{actions} finite numbers")
        high = spec.array("fixed.action.high", (actions,), f"{actions} finite numbers")
        if (low > high).any():
            raise spec.fail("fixed.action.high", "≥ fixed.action.low, entry by entry")
        shape = spec.array("fixed.action.shape", (None,), "a list of sizes ≥ 0", integer=True)
        if (shape < 0).any() or math.prod(shape.tolist()) != actions:
            raise spec.fail("fixed.action.shape", f"a list of sizes whose product is {actions}")
        if spec.get("fixed.action.dtype", str, "a numpy dtype name") not in GYM_DTYPES:
            raise spec.fail("fixed.action.dtype", f"one of {', '.join(GYM_DTYPES)}")
    else:
        raise spec.fail("fixed.action.space", "'discrete' or 'box'")


def check_fixed(spec: dict[str, Any], where: Path) -> None:
    """The fixed parts are pacplan's: the UAV's constants by their sha256 and net_scale as the
    world's options set it; the quadruped's gait map as the runtime's formula has it; a gym
    world's family and hidden size as its options set them."""
    world, fixed = spec["world"]["name"], spec["fixed"]
    if world == "uav":
        rest = {k: v for k, v in fixed.items() if k not in ("net_scale", "policy",
                                                             "policy_width")}
        digest = hashlib.sha256(json.dumps(rest, sort_keys=True, separators=(",", ":"))
                                .encode()).hexdigest()
        if digest not in FIXED_SHA256["uav"]:
            raise PlannerError(f"{where}: field fixed is not the UAV world's (the Depth Filter "
                               "cells, primitive library, camera, normalisation and tie-break "
                               "order are constants pacplan writes)")
        scale = spec["world"]["options"].get("net_scale", UAV_NET_SCALE)
        if fixed["net_scale"] != scale:
            raise PlannerError(f"{where}: field fixed.net_scale is {fixed['net_scale']!r} but "
                               f"the world's options give {scale!r}")
        _check_uav_family(spec["world"]["options"], fixed, where)
    elif world == "quadruped" and {k: fixed["gait_map"].get(k) for k in GAIT_MAP} != GAIT_MAP:
        raise PlannerError(f"{where}: field fixed.gait_map is not the gait map pacplan "
                           f"certifies ({GAIT_MAP})")
    elif world == "gym":
        options = spec["world"]["options"]
        family = options.get("policy", "linear")
        if fixed["family"] != family:
            raise PlannerError(f"{where}: field fixed.family is {fixed['family']!r} but the "
                               f"world's options give policy {family!r}")
        if family == "mlp" and fixed["hidden"] != options.get("hidden", GYM_HIDDEN):
            raise PlannerError(f"{where}: field fixed.hidden is {fixed['hidden']!r} but the "
                               f"world's options give {options.get('hidden', GYM_HIDDEN)!r}")


def _check_uav_family(options: dict[str, Any], fixed: dict[str, Any], where: Path) -> None:
    """The UAV policy family of the fixed parts is the one the world's options select."""
    policy = options.get("policy", "paper")
    width = options.get("policy_width")
    if policy == "conv" and width is None:
        width = UAV_CONV_DEFAULT_WIDTH
    have = (fixed.get("policy", "paper"), fixed.get("policy_width"))
    if have != (policy, width):
        raise PlannerError(f"{where}: fields fixed.policy, fixed.policy_width are {have[0]!r}, "
                           f"{have[1]!r} but the world's options give {policy!r}, {width!r}")


def check_net(world: str, digest: str, where: Path, fixed: dict[str, Any] | None = None
              ) -> None:
    """net.onnx must be the network pacplan exports for this world (a known sha256); a gym
    world's must be its policy family's (`fixed.family`), a UAV's its (`fixed.policy`)."""
    known = NET_SHA256[world]
    name = world
    if world == "gym" and fixed is not None:
        known, name = GYM_NET_SHA256[fixed["family"]], f"gym {fixed['family']}"
    elif world == "uav" and fixed is not None:
        policy = fixed.get("policy", "paper")
        known, name = UAV_NET_SHA256[policy], "uav" if policy == "paper" else f"uav {policy}"
    if digest not in known:
        raise PlannerError(f"{where}: not the {name} network pacplan exports (sha256 "
                           f"{digest[:12]}… is not a known one)")


def check_weights(weights: dict[str, np.ndarray], session: Any, world: str, k: int,
                  where: Path, fixed: dict[str, Any] | None = None) -> None:
    """One finite float32 weight set per policy of the support, of exactly the net's shapes
    (a gym net's sizes are named, and given by `fixed`: obs_dim, hidden, actions)."""
    sizes = {key: (fixed or {}).get(key) for key in ("obs_dim", "hidden", "actions")}
    if world == "uav":
        sizes = uav_net_sizes(fixed or {})
    expected = {i.name: tuple(sizes.get(d) if isinstance(d, str) else d for d in i.shape)
                for i in session.get_inputs() if i.name not in OBSERVATION_INPUTS[world]}
    if set(weights) != set(expected):
        raise PlannerError(f"{where}: tensors {sorted(weights)} are not the net's weight "
                           f"inputs {sorted(expected)}")
    for name, shape in expected.items():
        w = weights[name]
        if w.dtype != np.float32 or w.shape != (k, *shape):
            raise PlannerError(f"{where}: tensor {name} is {w.dtype} {w.shape}, not float32 "
                               f"{(k, *shape)} (one set per policy of the support)")
        if not np.isfinite(w).all():
            raise PlannerError(f"{where}: tensor {name} holds NaN or infinite weights")
