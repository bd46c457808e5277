"""Policy families for the `gym` world: flat weights θ → actions, batched over k policies.

A family is any object with `dim` (the number of weights) and `act(thetas, obs)`, which maps
(k, dim) float64 weights and (k, obs_dim) float64 flattened observations to k actions the
environment accepts. The built-ins read the flattened observation:

- `linear`: z = W·obs + b, W (a × o) row-major, then b (a), so d = a·o + a;
- `mlp`: z = W₂·tanh(W₁·obs + b₁) + b₂ with one hidden layer of `hidden` units, weights in the
  order W₁ (h × o), b₁ (h), W₂ (a × h), b₂ (a).

For `Discrete(n, start)` the action is start + argmax z (a = n; all-zero weights give `start`);
for a bounded `Box` it is low + (tanh z + 1)/2 · (high − low) (a = its flattened size; all-zero
weights give the middle of the box). Products are reduced row by row (`sum(axis=-1)`), never by a
matrix product, so one policy's action never depends on how many policies share the batch: a cost
is then the same bit for bit however an executor chunks the work.

The built-ins also describe themselves for `pacplan export` (`runtime_parts`): the weight layout
and action rule as plain JSON, which `pacplan_runtime` replays on a planner's ONNX net. A
`module:factory` family has no such description, so it cannot be exported.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError

BUILTIN_POLICIES = ("linear", "mlp")


class PolicyFamily(Protocol):
    """What the `gym` world needs of a policy family (a `module:factory` must return one)."""

    dim: int

    def act(self, thetas: np.ndarray, obs: np.ndarray) -> Any:
        """(k, dim) float64 weights, (k, obs_dim) float64 observations -> k actions."""
        ...


class _ActionHead:
    """Turns k raw outputs z (k, a) into k actions of `space` (discrete or bounded box)."""

    def __init__(self, space: spaces.Space) -> None:
        if isinstance(space, spaces.Discrete):
            self.size, self.start, self.box = int(space.n), int(space.start), None
        elif isinstance(space, spaces.Box):
            low = np.asarray(space.low, np.float64).ravel()
            high = np.asarray(space.high, np.float64).ravel()
            if not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise PacplanError("gym world: the built-in policies need a Box action space with "
                                   f"finite bounds, got {space}; pass policy='module:factory'")
            self.size, self.box = low.size, (low, high, space.shape, space.dtype)
        else:
            raise PacplanError(f"gym world: the built-in policies take Discrete or Box actions, "
                               f"got {space}; pass policy='module:factory'")

    def runtime_parts(self) -> dict[str, Any]:
        """The action rule as plain JSON for the exported planner (`pacplan_runtime`)."""
        if self.box is None:
            return {"space": "discrete", "n": self.size, "start": self.start,
                    "rule": "start + argmax z (the first of tied outputs)"}
        low, high, shape, dtype = self.box
        return {"space": "box", "low": low.tolist(), "high": high.tolist(),
                "shape": [int(n) for n in shape], "dtype": np.dtype(dtype).name,
                "rule": "low + (tanh z + 1) / 2 * (high - low) in float64, reshaped to shape, "
                        "then cast to dtype"}

    def __call__(self, z: np.ndarray) -> list[Any]:
        if self.box is None:
            return [self.start + int(i) for i in np.argmax(z, axis=1)]
        low, high, shape, dtype = self.box
        a = low + (np.tanh(z) + 1.0) * 0.5 * (high - low)
        return [row.reshape(shape).astype(dtype) for row in a]


def _affine(w: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """(k, r, c) · (k, c) + (k, r), each row reduced on its own (independent of k)."""
    return (w * x[:, None, :]).sum(axis=-1) + b


class LinearPolicy:
    """z = W·obs + b over the flattened observation."""

    def __init__(self, obs_dim: int, action_space: spaces.Space) -> None:
        self.head = _ActionHead(action_space)
        self.obs_dim, self.out = obs_dim, self.head.size
        self.dim = self.out * obs_dim + self.out

    def runtime_parts(self) -> dict[str, Any]:
        """Family, sizes and action rule, as `pacplan export` records them."""
        return {"family": "linear", "obs_dim": self.obs_dim, "actions": self.out,
                "action": self.head.runtime_parts()}

    def act(self, thetas: np.ndarray, obs: np.ndarray) -> list[Any]:
        k, o, a = len(thetas), self.obs_dim, self.out
        w = thetas[:, : a * o].reshape(k, a, o)
        return self.head(_affine(w, thetas[:, a * o:], obs))


class MLPPolicy:
    """z = W₂·tanh(W₁·obs + b₁) + b₂: one tanh hidden layer of `hidden` units."""

    def __init__(self, obs_dim: int, action_space: spaces.Space, hidden: int) -> None:
        self.head = _ActionHead(action_space)
        self.obs_dim, self.hidden, self.out = obs_dim, hidden, self.head.size
        self.dim = hidden * obs_dim + hidden + self.out * hidden + self.out

    def runtime_parts(self) -> dict[str, Any]:
        """Family, sizes and action rule, as `pacplan export` records them."""
        return {"family": "mlp", "obs_dim": self.obs_dim, "hidden": self.hidden,
                "actions": self.out, "action": self.head.runtime_parts()}

    def act(self, thetas: np.ndarray, obs: np.ndarray) -> list[Any]:
        k, o, h, a = len(thetas), self.obs_dim, self.hidden, self.out
        i = 0
        w1 = thetas[:, i: i + h * o].reshape(k, h, o)
        i += h * o
        b1 = thetas[:, i: i + h]
        i += h
        w2 = thetas[:, i: i + a * h].reshape(k, a, h)
        i += a * h
        hid = np.tanh(_affine(w1, b1, obs))
        return self.head(_affine(w2, thetas[:, i: i + a], hid))


def flat_size(space: spaces.Space, who: str, way_out: str) -> int:
    """The length of `space`'s flattened observations, or one line naming the space gymnasium
    cannot flatten (MiniGrid's mission text, a custom Space) and `way_out`."""
    try:
        return int(spaces.flatdim(space))
    except (NotImplementedError, ValueError, TypeError, AttributeError):
        shown = " ".join(str(space).split())
        shown = shown if len(shown) <= 160 else shown[:159] + "…"
        raise PacplanError(f"{who} takes flattened observations, and gymnasium cannot flatten "
                           f"the observation space {shown}: {way_out}") from None


def make_policy(policy: str, observation_space: spaces.Space, action_space: spaces.Space,
                hidden: int) -> PolicyFamily:
    """A built-in family by name, or `module:factory` called as
    factory(observation_space, action_space) -> an object with `dim` and `act` (handed the raw
    spaces: only the built-in families flatten observations)."""
    if policy in ("linear", "mlp"):
        obs_dim = flat_size(observation_space, f"gym world: policy {policy!r}",
                            "give a 'module:factory' family that reads the raw observations")
        if policy == "linear":
            return LinearPolicy(obs_dim, action_space)
        return MLPPolicy(obs_dim, action_space, hidden)
    if ":" not in policy:
        raise PacplanError(f"gym world: unknown policy {policy!r}; choose linear, mlp or "
                           "'module:factory'")
    from pacplan.io.user_code import calling_user_code, import_target

    factory = import_target(policy, f"gym world: policy {policy!r}")
    with calling_user_code(f"gym world: policy factory {policy!r} failed"):
        family = factory(observation_space, action_space)
    dim = getattr(family, "dim", None)
    if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1 \
            or not callable(getattr(family, "act", None)):
        raise PacplanError(f"gym world: policy {policy!r} must return an object with an integer "
                           "`dim` >= 1 and a method `act(thetas, obs)`")
    return family
