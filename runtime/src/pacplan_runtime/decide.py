"""One decision of each world's policy from an observation, given the planner's fixed parts.

UAV: score_j = DepthFilter_j(depth) + net_scale · net_j(depth / far), the best primitive flown,
ties toward the straighter one (the tie-break order). Every step is float32 like the batched
simulator that produced the certified costs; the net runs in onnxruntime.
Quadruped: η = policy(depth, proprio) in float64 like the numpy policy, rounded to float32 (the
action the Gymnasium env and the certified rollouts take), then the paper's gait map.
Gym: z = net(flattened observation) in float64 like `pacplan.worlds.from_gym.policies`, then its
action rule: start + argmax z (discrete), or low + (tanh z + 1)/2 · (high − low) cast to the
box's dtype.
A decider holds only what is fixed at load: what one observation needs between `inputs` and
`decide` goes through the caller, so one planner decides for several threads at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pacplan_runtime.bundle import PlannerError


@dataclass(frozen=True)
class PrimitiveDecision:
    """A UAV primitive: its index, end offsets (dx, dz) m, duration, and the positions
    (relative to where it starts, metres) at `times_s` along it."""

    primitive: int
    offset_m: tuple[float, float]
    duration_s: float
    times_s: np.ndarray
    trajectory_m: np.ndarray
    scores: np.ndarray


@dataclass(frozen=True)
class GaitDecision:
    """Sine-gait parameters for one primitive of `duration_s`, and the policy output η."""

    eta: np.ndarray
    a1: float
    a2: float
    a_st: float
    omega: float
    duration_s: float


@dataclass(frozen=True)
class GymDecision:
    """A gym world's action, as the environment takes it (`env.step(decision.action)`), and
    the network's raw outputs z it came from."""

    action: Any
    z: np.ndarray


_F32_MAX = float(np.finfo(np.float32).max)


def _array(obs: Any, name: str, shape: tuple[int, ...], low: float | None = None
           ) -> np.ndarray:
    """An observation as float32, refused (naming it) unless it is a float array of `shape`
    whose values are finite in float32 (a float64 beyond its range would become ±inf) and,
    with `low`, ≥ low (a depth is never negative)."""
    try:
        arr = np.asarray(obs)
    except (ValueError, TypeError) as exc:
        raise PlannerError(f"observation {name}: not an array ({exc})") from None
    if arr.shape != shape or arr.dtype.kind != "f":
        raise PlannerError(f"observation {name} must be finite float {shape} (the certified "
                           f"float layout, metres), got {arr.dtype} {arr.shape}")
    wide = arr.astype(np.float64)
    if not np.isfinite(wide).all():
        raise PlannerError(f"observation {name} must be finite float {shape}: it holds NaN or "
                           "infinity")
    if np.abs(wide).max() > _F32_MAX:
        raise PlannerError(f"observation {name} holds {wide.flat[np.abs(wide).argmax()]!r}, "
                           "beyond float32's range (the certified layout is float32)")
    if low is not None and wide.min() < low:
        raise PlannerError(f"observation {name} holds {wide.min()!r} < {low:g}: a depth is "
                           "never negative")
    return arr.astype(np.float32)


def output_problem(out: Any) -> str | None:
    """Why a model's first output is not a tensor of numbers (a ZipMap's sequence of maps,
    strings), in words, else None: such an output is refused, never turned into an action."""
    if isinstance(out, list | tuple | dict):
        inner = " of maps (a ZipMap's)" if out and isinstance(out[0], dict) else ""
        return (f"its first output is a sequence{inner}, not a tensor of numbers; a policy's "
                "first output must be its scores or action values")
    dtype = np.asarray(out).dtype
    if dtype.kind not in "biuf":
        what = "strings" if dtype.kind in "OUS" else f"values of dtype {dtype}"
        return (f"its first output holds {what}, not numbers; a policy's first output must be "
                "its scores or action values")
    return None


def run_net(session: Any, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The net's output on `feeds`; an onnxruntime failure, an output that is not numbers or
    a non-finite output is one PlannerError, never a decision from non-finite scores."""
    try:
        raw = session.run(None, feeds)[0]
    except Exception as exc:  # onnxruntime's own error types
        reason = " ".join(str(exc).split())[:300]
        raise PlannerError(f"the planner's net failed on this observation "
                           f"({type(exc).__name__}: {reason})") from None
    problem = output_problem(raw)
    if problem is not None:
        raise PlannerError(f"the planner's net: {problem}")
    out = np.asarray(raw)
    if not np.isfinite(out).all():
        raise PlannerError("the planner's net gave a non-finite output for this observation; "
                           "no decision is made from it")
    return out


class UAVDecider:
    """The UAV policy's fixed parts, prepared once."""

    def __init__(self, fixed: dict[str, Any]) -> None:
        self.size = int(fixed["image_size"])
        self.far = np.float32(fixed["far_m"])
        self.net_scale = float(fixed["net_scale"])
        cell = int(fixed["cell_size"])
        tl = np.asarray(fixed["filter_cells"], dtype=np.int64)
        rows = tl[:, :1] + np.arange(cell)
        cols = tl[:, 1:] + np.arange(cell)
        self.cell_index = (rows[:, :, None] * self.size + cols[:, None, :]).reshape(len(tl), -1)
        self.order = np.asarray(fixed["tie_break_order"], dtype=np.int64)
        lib = fixed["primitives"]
        self.offsets = np.asarray(lib["offsets_m"], dtype=np.float64)
        self.duration = float(lib["duration_s"])
        self.times = np.asarray(lib["check_times_s"], dtype=np.float64)
        self.paths = np.asarray(lib["check_displacements_m"], dtype=np.float64)

    def inputs(self, obs: Any) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """The net's feeds and the checked depth image, which `decide` needs again: handed
        back to the caller, never kept here, so one decider serves every thread at once."""
        depth = _array(obs, "depth", (self.size, self.size), low=0.0)
        return {"x": (depth / self.far)[None, None]}, depth

    def decide(self, net: np.ndarray, depth: np.ndarray) -> PrimitiveDecision:
        cells = depth.reshape(-1)[self.cell_index].astype(np.float64)
        filt = (cells.sum(axis=1) / cells.shape[1]).astype(np.float32)
        scores = filt + np.float32(self.net_scale) * net[0]
        if not np.isfinite(scores).all():
            raise PlannerError("the primitives' scores are not finite for this observation; "
                               "no decision is made from them")
        j = int(self.order[int(np.argmax(scores[self.order]))])
        dx, dz = self.offsets[j]
        return PrimitiveDecision(j, (float(dx), float(dz)), self.duration, self.times.copy(),
                                 self.paths[j].copy(), scores)


class QuadrupedDecider:
    """The quadruped policy's fixed parts (observation layout, gait map), prepared once."""

    def __init__(self, fixed: dict[str, Any]) -> None:
        self.size = int(fixed["image_size"])
        self.n_proprio = int(fixed["n_proprio"])
        self.duration = float(fixed["primitive_s"])
        gait = fixed["gait_map"]
        self.a_gain, self.a_offset = (float(v) for v in gait["amplitude"])
        self.w_gain, self.w_offset = (float(v) for v in gait["omega"])

    def inputs(self, obs: Any) -> tuple[dict[str, np.ndarray], None]:
        """The net's feeds (and no context: the decision needs the net's output only)."""
        if not isinstance(obs, dict) or not {"depth", "proprio"} <= set(obs):
            raise PlannerError('quadruped observation must be a dict {"depth", "proprio"}, '
                               f"got {type(obs).__name__}"
                               + (f" with keys {sorted(map(str, obs))}"
                                  if isinstance(obs, dict) else ""))
        depth = _array(obs["depth"], "depth", (self.size, self.size), low=0.0)
        proprio = _array(obs["proprio"], "proprio", (self.n_proprio,))
        return {"depth": depth.astype(np.float64)[None],
                "proprio": proprio.astype(np.float64)[None]}, None

    def decide(self, net: np.ndarray, _context: None = None) -> GaitDecision:
        eta = net[0].astype(np.float32)
        e = np.clip(eta.astype(np.float64), 0.0, 1.0)
        a1 = self.a_gain * e[0] + self.a_offset
        a2 = self.a_gain * e[1] + self.a_offset
        omega = self.w_gain * e[2] + self.w_offset
        a_st = min(e[3], 1.0 - a1, 1.0 - a2)
        return GaitDecision(eta, float(a1), float(a2), float(a_st), float(omega), self.duration)


class GymDecider:
    """A built-in gym policy family's observation size and action rule, prepared once."""

    def __init__(self, fixed: dict[str, Any]) -> None:
        self.obs_dim = int(fixed["obs_dim"])
        action = fixed["action"]
        self.discrete = action["space"] == "discrete"
        if self.discrete:
            self.start = int(action["start"])
        else:
            self.low = np.asarray(action["low"], dtype=np.float64)
            self.high = np.asarray(action["high"], dtype=np.float64)
            self.shape = tuple(int(n) for n in action["shape"])
            self.dtype = np.dtype(action["dtype"])

    def inputs(self, obs: Any) -> tuple[dict[str, np.ndarray], None]:
        """The net's feed: the flattened observation (obs_dim,) as float64."""
        try:
            arr = np.asarray(obs)
        except (ValueError, TypeError) as exc:
            raise PlannerError(f"observation: not an array ({exc})") from None
        if arr.shape != (self.obs_dim,) or arr.dtype.kind not in "fiub":
            raise PlannerError(f"observation must be the flattened numeric ({self.obs_dim},) "
                               "array the gym world's policy reads (np.ravel of a Box "
                               "observation, gymnasium.spaces.flatten of any other), got "
                               f"{arr.dtype} {arr.shape}")
        flat = arr.astype(np.float64)
        if not np.isfinite(flat).all():
            raise PlannerError("observation holds NaN or infinity")
        return {"obs": flat[None]}, None

    def decide(self, net: np.ndarray, _context: None = None) -> GymDecision:
        z = net[0].astype(np.float64)
        if self.discrete:
            return GymDecision(self.start + int(np.argmax(z)), z)
        a = self.low + (np.tanh(z) + 1.0) * 0.5 * (self.high - self.low)
        return GymDecision(a.reshape(self.shape).astype(self.dtype), z)


class NetPolicies:
    """A world planner's policies: one net, a weight set per policy of the support, and the
    world's decider. Everything is fixed at load (the weights read-only), so threads decide at
    once (onnxruntime's run is thread-safe)."""

    def __init__(self, spec: dict[str, Any], weights: dict[str, np.ndarray],
                 session: Any) -> None:
        world = str(spec["world"]["name"])
        self._decider = {"uav": UAVDecider, "quadruped": QuadrupedDecider,
                         "gym": GymDecider}[world](spec["fixed"])
        dtype = np.float64 if spec["net"]["dtype"] == "float64" else np.float32
        self._weights = {name: _frozen(w.astype(dtype, copy=False))
                         for name, w in weights.items()}
        self._session = session

    def decide(self, slot: int, observation: Any) -> PrimitiveDecision | GaitDecision \
            | GymDecision:
        """Policy `slot`'s decision on one observation."""
        feeds, context = self._decider.inputs(observation)
        for name, w in self._weights.items():
            feeds[name] = w[slot]
        return self._decider.decide(run_net(self._session, feeds), context)


def _frozen(array: np.ndarray) -> np.ndarray:
    """`array`, read-only: shared by every thread's decisions, so nothing may write it."""
    array.flags.writeable = False
    return array
