"""A Stable-Baselines3 `.zip` read without unpickling anything, acting as SB3's
`model.predict(obs, deterministic=True)` does.

An SB3 zip holds pickles (cloudpickle in `data`, torch pickles in the .pth files), and loading
them with `PPO.load` runs whatever code they name. Here nothing is unpickled:

- `policy.pth` is read with `torch.load(..., weights_only=True)`, torch's restricted loader that
  only rebuilds tensors and plain containers (anything else is refused);
- `data` is JSON; its pickled fields (the policy class, `policy_kwargs`) are only disassembled
  with `pickletools.genops`, which lists the classes a pickle names without executing it;
- the network is inferred from the state dict's keys and shapes: PPO/A2C `ActorCriticPolicy`
  (`mlp_extractor.policy_net.*` then `action_net`), DQN (`q_net.q_net.*`), SAC
  (`actor.latent_pi.*`, `actor.mu`) and TD3/DDPG (`actor.mu.*`), with the activation the
  policy was built with (SB3's default when none was given: Tanh for actor-critic, ReLU else).

Only a network SB3 itself builds is read, so what runs here is what SB3 would run:

- the policy class and the activation must be SB3's and torch's own classes, named by
  reference (a class of the user's, even one named `Tanh` or subclassing torch's, runs code of
  its own, as does a `functools.partial`): anything else in `policy_kwargs` is refused, and
  the text SB3 writes beside the pickle must agree with it;
- SB3's MLPs are `Sequential(Linear, act, Linear, act, …)`, so their Linear layers sit at
  indices 0, 2, 4, … with nothing between; each layer takes what the one before gives;
- weights must be finite, and so must every output the network gives (never an action
  taken from NaN).

Actions are deterministic: argmax for Discrete (of the Q-values for DQN, of the Categorical's
probabilities for PPO/A2C, as SB3 takes them); for a Box the Gaussian's mean clipped to the
box (PPO/A2C), or tanh of it rescaled to the box (SAC, TD3). What cannot be read this way
(CNN or custom feature extractors, Dict observations, recurrent or other algorithms' policies,
gSDE) is refused in one line naming it. VecNormalize statistics live outside the zip (a
separate pickle, never loaded): converted to an .npz they are applied by
`pacplan.policy_certification.normalization`.
"""

from __future__ import annotations

import io
import itertools
import math
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError
from pacplan.policy_certification.stable_baselines_zip import (
    activation_of,
    algorithm_of,
    open_zip,
    read_data_json,
    read_member,
    refuse_extractor,
    serialized_globals,
)


@dataclass(frozen=True)
class Layer:
    """One Linear layer: weight (out, in), bias (out,), as float32 tensors; `name` is its key
    prefix in the state dict."""

    weight: Any
    bias: Any
    name: str = ""


class SB3Policy:
    """A deterministic MLP policy read from an SB3 zip (module docstring)."""

    def __init__(self, path: str, data: bytes, observation_space: spaces.Space,
                 action_space: spaces.Space) -> None:
        self.label = path
        archive = open_zip(path, data)
        meta = read_data_json(path, read_member(path, archive, "data"))
        policy_class = serialized_globals(path, meta, "policy_class")
        self.algorithm, default_act = algorithm_of(path, policy_class)
        kwargs_globals = serialized_globals(path, meta, "policy_kwargs", required=False)
        kwargs = meta.get("policy_kwargs") if isinstance(meta.get("policy_kwargs"), dict) else {}
        refuse_extractor(path, kwargs, kwargs_globals)
        if meta.get("use_sde") is True or kwargs.get("squash_output") is True:
            raise PacplanError(f"{path}: an SB3 policy trained with gSDE (use_sde) or "
                               "squash_output is not supported by certify-policy")
        state = _state_dict(path, read_member(path, archive, "policy.pth"))
        self.activation = activation_of(path, kwargs, kwargs_globals, default_act)
        self.hidden, self.head = _checked(path, *_network(path, self.algorithm, state))
        self.detail = f"{self.algorithm} MLP ({self.activation})"  # after the kind, 'sb3'
        self._obs_space, self._action_space = observation_space, action_space
        _check_spaces(path, self.algorithm, self.hidden, self.head, observation_space,
                      action_space)
        import torch

        self._act = getattr(torch.nn, self.activation)()

    def act(self, obs: Any) -> Any:
        """The action SB3's `predict(obs, deterministic=True)` gives for one observation."""
        import torch

        x = np.asarray(spaces.flatten(self._obs_space, obs), dtype=np.float32)[None]
        with torch.no_grad():
            z = torch.as_tensor(x)
            last = len(self.hidden) - 1
            for i, layer in enumerate(self.hidden):
                z = torch.nn.functional.linear(z, layer.weight, layer.bias)
                if self.algorithm != "dqn" or i < last:  # DQN's q_net ends in a plain Linear
                    z = self._act(z)
            if self.head is not None:
                z = torch.nn.functional.linear(z, self.head.weight, self.head.bias)
            values = z.numpy()[0].tolist()
            if not all(map(math.isfinite, values)):
                shown = np.array2string(x[0], precision=4, threshold=8, max_line_width=10**6)
                bad = next(v for v in values if not math.isfinite(v))
                raise PacplanError(f"{self.label}: the network gave a non-finite output ({bad}) "
                                   f"for observation {shown}; no action is taken from it")
            space = self._action_space
            if isinstance(space, spaces.Discrete):  # argmax: the first maximum, as torch's
                if self.algorithm == "dqn":  # SB3: q_values.argmax(dim=1)
                    return np.int64(np.argmax(values))
                # SB3: the mode of Categorical(logits=z), the argmax of its probabilities
                # (logits one float apart can tie there), by torch's own two steps
                probs = torch.softmax(z - z.logsumexp(dim=-1, keepdim=True), dim=-1)
                return np.int64(np.argmax(probs.numpy()[0]))
            if self.algorithm in ("sac", "td3"):
                z = torch.tanh(z)  # SAC's squashed mode, TD3's final nn.Tanh: torch's tanh
            out = z.numpy()[0]
        assert isinstance(space, spaces.Box)
        if self.algorithm in ("sac", "td3"):  # SB3's unscale_action, in numpy as SB3 does it
            action = space.low + 0.5 * (out + 1.0) * (space.high - space.low)
        else:
            action = np.clip(out, space.low, space.high)
        return np.asarray(action, dtype=space.dtype).reshape(space.shape)


def _state_dict(path: str, raw: bytes) -> dict[str, Any]:
    import pickle

    import torch

    try:
        state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, ValueError, EOFError, zipfile.BadZipFile,
            AttributeError, TypeError) as exc:
        reason = " ".join(str(exc).split())[:160]
        raise PacplanError(f"{path}: policy.pth is not a plain state dict (torch's "
                           f"weights_only loader refused it: {reason})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor)
                                              for v in state.values()):
        raise PacplanError(f"{path}: policy.pth is not a state dict of tensors")
    return {str(k): v.detach().to(torch.float32) for k, v in state.items()}


def _layers(path: str, state: dict[str, Any], prefix: str) -> list[Layer]:
    """The Linear layers of the Sequential at `prefix`, in order; anything else is refused."""
    index: dict[int, dict[str, Any]] = {}
    for key, value in state.items():
        if not key.startswith(prefix + "."):
            continue
        head, _, leaf = key[len(prefix) + 1:].partition(".")
        if not head.isdigit() or leaf not in ("weight", "bias"):
            raise PacplanError(f"{path}: unexpected layer {key} in an SB3 MLP policy")
        index.setdefault(int(head), {})[leaf] = value
    layers = []
    for i in sorted(index):
        w, b = index[i].get("weight"), index[i].get("bias")
        if w is None or b is None or w.ndim != 2 or b.shape != (w.shape[0],):
            raise PacplanError(f"{path}: layer {prefix}.{i} is not a Linear layer (weight "
                               "(out, in) and bias (out,)); only MLP policies are read")
        layers.append(Layer(w, b, f"{prefix}.{i}"))
    if sorted(index) != list(range(0, 2 * len(index), 2)):  # create_mlp, MlpExtractor
        raise PacplanError(f"{path}: {prefix} has Linear layers at {sorted(index)}; SB3 builds "
                           "Sequential(Linear, activation, Linear, …) with them at 0, 2, 4, …: "
                           "not a network SB3 builds")
    return layers


def _single(path: str, state: dict[str, Any], prefix: str) -> Layer:
    w, b = state.get(prefix + ".weight"), state.get(prefix + ".bias")
    if w is None or b is None or w.ndim != 2 or b.shape != (w.shape[0],):
        raise PacplanError(f"{path}: no Linear layer {prefix} in its policy.pth")
    return Layer(w, b, prefix)


def _checked(path: str, hidden: list[Layer], head: Layer | None) -> tuple[list[Layer],
                                                                           Layer | None]:
    """The layers chain (each takes what the one before gives) and hold finite numbers."""
    layers = hidden + ([head] if head is not None else [])
    for before, layer in itertools.pairwise(layers):
        if layer.weight.shape[1] != before.weight.shape[0]:
            raise PacplanError(f"{path}: layer {layer.name} takes {layer.weight.shape[1]} "
                               f"inputs but {before.name} gives {before.weight.shape[0]}: not "
                               "a network SB3 builds")
    import torch

    for layer in layers:
        for leaf, tensor in (("weight", layer.weight), ("bias", layer.bias)):
            if not bool(torch.isfinite(tensor).all()):
                raise PacplanError(f"{path}: {layer.name}.{leaf} holds NaN or infinite "
                                   "values: no action is taken from such a network")
    return hidden, head


def _network(path: str, algorithm: str, state: dict[str, Any]) -> tuple[list[Layer],
                                                                         Layer | None]:
    """(hidden layers, output layer) of the deterministic action path."""
    if any("features_extractor." in k for k in state):
        raise PacplanError(f"{path}: its features extractor has weights (a CNN or custom "
                           "extractor): certify-policy reads MLP policies only")
    if algorithm == "actor-critic":
        hidden = (_layers(path, state, "mlp_extractor.shared_net")
                  + _layers(path, state, "mlp_extractor.policy_net"))
        return hidden, _single(path, state, "action_net")
    if algorithm == "dqn":
        layers = _layers(path, state, "q_net.q_net")
        if not layers:
            raise PacplanError(f"{path}: no q_net.q_net layers in its policy.pth")
        return layers, None
    if algorithm == "sac":
        if "actor.mu.0.weight" in state:
            raise PacplanError(f"{path}: a SAC policy trained with gSDE is not supported")
        return _layers(path, state, "actor.latent_pi"), _single(path, state, "actor.mu")
    layers = _layers(path, state, "actor.mu")  # TD3 / DDPG: Linear, act, …, Linear, Tanh
    if not layers:
        raise PacplanError(f"{path}: no actor.mu layers in its policy.pth")
    return layers[:-1], layers[-1]


def _check_spaces(path: str, algorithm: str, hidden: list[Layer], head: Layer | None,
                  observation_space: spaces.Space, action_space: spaces.Space) -> None:
    """The network's input and output sizes fit the environment's spaces."""
    if isinstance(observation_space, spaces.Box) and observation_space.dtype == np.uint8 \
            and len(observation_space.shape) == 3:
        raise PacplanError(f"{path}: image observations need a CNN policy, which "
                           "certify-policy does not read")
    if not isinstance(observation_space, spaces.Box | spaces.Discrete | spaces.MultiBinary
                      | spaces.MultiDiscrete):
        raise PacplanError(f"{path}: observation space {observation_space} is not supported "
                           "(Box, Discrete, MultiBinary or MultiDiscrete)")
    first = hidden[0] if hidden else head
    assert first is not None
    obs_dim = spaces.flatdim(observation_space)
    if first.weight.shape[1] != obs_dim:
        raise PacplanError(f"{path}: the policy takes observations of size "
                           f"{first.weight.shape[1]} but the environment gives {obs_dim}")
    last = head if head is not None else hidden[-1]
    out = last.weight.shape[0]
    if isinstance(action_space, spaces.Discrete):
        if algorithm in ("sac", "td3"):
            raise PacplanError(f"{path}: a {algorithm.upper()} policy needs a Box action space, "
                               f"the environment has {action_space}")
        if int(action_space.start) != 0:
            raise PacplanError(f"{path}: SB3 acts on Discrete spaces starting at 0; the "
                               f"environment's is {action_space}")
        want = int(action_space.n)
    elif isinstance(action_space, spaces.Box):
        if algorithm == "dqn":
            raise PacplanError(f"{path}: a DQN policy needs a Discrete action space, the "
                               f"environment has {action_space}")
        if algorithm in ("sac", "td3") and not (np.isfinite(action_space.low).all()
                                                and np.isfinite(action_space.high).all()):
            raise PacplanError(f"{path}: a {algorithm.upper()} policy needs a bounded Box")
        want = int(np.prod(action_space.shape))
    else:
        raise PacplanError(f"{path}: action space {action_space} is not supported (Discrete "
                           "or Box)")
    if out != want:
        raise PacplanError(f"{path}: the policy gives {out} action outputs but the "
                           f"environment's action space {action_space} needs {want}")
