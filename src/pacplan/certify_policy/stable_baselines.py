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

Actions are deterministic: argmax for Discrete; for a Box the Gaussian's mean clipped to the
box (PPO/A2C), or tanh of it rescaled to the box (SAC, TD3). What cannot be read this way
(CNN or custom feature extractors, Dict observations, recurrent or other algorithms' policies,
gSDE) is refused in one line naming it. VecNormalize statistics live outside the zip (a
separate pickle); a policy trained on normalized observations cannot be certified from its zip.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickletools
import zipfile
from dataclasses import dataclass
from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError

MAX_MEMBER_BYTES = 1 << 30
"""The largest zip member read (a policy.pth of a billion bytes is no MLP policy)."""

ACTIVATIONS = ("Tanh", "ReLU", "ELU", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Softplus",
               "Mish", "SELU", "CELU", "Hardtanh", "ReLU6", "Identity")
"""torch.nn activations (built with their default arguments, as SB3's policies build them)."""

_ALGORITHMS = {  # the policy class SB3 saves -> (algorithm family, default activation)
    "ActorCriticPolicy": ("actor-critic", "Tanh"),
    "DQNPolicy": ("dqn", "ReLU"),
    "SACPolicy": ("sac", "ReLU"),
    "TD3Policy": ("td3", "ReLU"),
}


@dataclass(frozen=True)
class Layer:
    """One Linear layer: weight (out, in), bias (out,), as float32 tensors."""

    weight: Any
    bias: Any


def pickle_globals(data: bytes) -> list[tuple[str, str]]:
    """The (module, name) of every class or function a pickle refers to, by disassembly only
    (`pickletools.genops` never executes anything); memoized strings are followed."""
    found: list[tuple[str, str]] = []
    pushed: list[Any] = []  # what each push put on the stack: a string, or None
    memo: dict[int, Any] = {}
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("GLOBAL", "INST"):
            module, _, name = str(arg).partition(" ")
            found.append((module, name))
        elif op.name == "STACK_GLOBAL":
            if len(pushed) >= 2 and isinstance(pushed[-2], str) and isinstance(pushed[-1], str):
                found.append((pushed[-2], pushed[-1]))
        elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE",
                         "SHORT_BINSTRING", "BINSTRING", "STRING"):
            pushed.append(str(arg))
        elif op.name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif op.name in ("PUT", "BINPUT", "LONG_BINPUT"):
            memo[int(arg)] = pushed[-1] if pushed else None
        elif op.name in ("GET", "BINGET", "LONG_BINGET"):
            pushed.append(memo.get(int(arg)))
        elif op.stack_after:
            pushed.append(None)
    return found


class SB3Policy:
    """A deterministic MLP policy read from an SB3 zip (module docstring)."""

    def __init__(self, path: str, data: bytes, observation_space: spaces.Space,
                 action_space: spaces.Space) -> None:
        self.label = path
        archive = _open_zip(path, data)
        meta = _read_json(path, _member(path, archive, "data"))
        policy_class = _serialized_globals(path, meta, "policy_class")
        self.algorithm, default_act = _algorithm(path, policy_class)
        kwargs_globals = _serialized_globals(path, meta, "policy_kwargs", required=False)
        kwargs = meta.get("policy_kwargs") if isinstance(meta.get("policy_kwargs"), dict) else {}
        _refuse_extractor(path, kwargs, kwargs_globals)
        if meta.get("use_sde") is True or kwargs.get("squash_output") is True:
            raise PacplanError(f"{path}: an SB3 policy trained with gSDE (use_sde) or "
                               "squash_output is not supported by certify-policy")
        state = _state_dict(path, _member(path, archive, "policy.pth"))
        self.activation = _activation(path, kwargs, kwargs_globals, default_act)
        self.hidden, self.head = _network(path, self.algorithm, state)
        self.kind = f"sb3 {self.algorithm} MLP ({self.activation})"
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
            out = z.numpy()[0]
        space = self._action_space
        if isinstance(space, spaces.Discrete):
            return np.int64(np.argmax(out))
        assert isinstance(space, spaces.Box)
        if self.algorithm in ("sac", "td3"):
            scaled = np.tanh(out)
            action = space.low + 0.5 * (scaled + 1.0) * (space.high - space.low)
        else:
            action = np.clip(out, space.low, space.high)
        return np.asarray(action, dtype=space.dtype).reshape(space.shape)


def _open_zip(path: str, data: bytes) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise PacplanError(f"{path}: not a Stable-Baselines3 .zip (not a zip archive)") from None


def _member(path: str, archive: zipfile.ZipFile, name: str) -> bytes:
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise PacplanError(f"{path}: not a Stable-Baselines3 .zip (no {name!r} inside; found "
                           f"{', '.join(archive.namelist()[:6]) or 'nothing'})") from None
    if info.file_size > MAX_MEMBER_BYTES:
        raise PacplanError(f"{path}: {name} is {info.file_size} bytes, more than an MLP "
                           f"policy's {MAX_MEMBER_BYTES}")
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as exc:  # a damaged archive
        raise PacplanError(f"{path}: cannot read {name} ({exc})") from None


def _read_json(path: str, raw: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise PacplanError(f"{path}: its 'data' member is not SB3's JSON") from None
    if not isinstance(meta, dict):
        raise PacplanError(f"{path}: its 'data' member is not SB3's JSON object")
    return meta


def _serialized_globals(path: str, meta: dict[str, Any], key: str,
                        required: bool = True) -> list[tuple[str, str]]:
    """The classes named by field `key`'s cloudpickle, disassembled (never loaded)."""
    field = meta.get(key)
    if not isinstance(field, dict) or ":serialized:" not in field:
        if required:
            raise PacplanError(f"{path}: SB3's data has no serialized {key}")
        return []
    try:
        raw = base64.b64decode(str(field[":serialized:"]), validate=True)
        return pickle_globals(raw)
    except (binascii.Error, ValueError) as exc:
        raise PacplanError(f"{path}: SB3's {key} is not a readable pickle ({exc})") from None


def _algorithm(path: str, policy_class: list[tuple[str, str]]) -> tuple[str, str]:
    """(algorithm family, default activation) from the saved policy class."""
    for module, name in policy_class:
        if module.startswith("stable_baselines3.") and name in _ALGORITHMS:
            return _ALGORITHMS[name]
    named = ", ".join(f"{m}.{n}" for m, n in policy_class) or "nothing"
    raise PacplanError(f"{path}: policy class {named} is not supported: certify-policy reads "
                       "the MLP policies of PPO, A2C, DQN, SAC and TD3 (no CNN, MultiInput or "
                       "recurrent policies)")


def _refuse_extractor(path: str, kwargs: dict[str, Any],
                      kwargs_globals: list[tuple[str, str]]) -> None:
    named = [n for _, n in kwargs_globals if n.endswith("Extractor") and n != "FlattenExtractor"]
    text = str(kwargs.get("features_extractor_class", ""))
    if named or (text and "FlattenExtractor" not in text):
        raise PacplanError(f"{path}: features extractor {named[0] if named else text} is not "
                           "supported: certify-policy reads MLP policies on flattened "
                           "observations")


def _activation(path: str, kwargs: dict[str, Any], kwargs_globals: list[tuple[str, str]],
                default: str) -> str:
    found = [n for m, n in kwargs_globals if m.startswith("torch.nn.modules")]
    if not found and "activation_fn" in kwargs:  # the string SB3 writes beside the pickle
        found = [str(kwargs["activation_fn"]).rstrip("'>").rsplit(".", 1)[-1]]
    name = found[0] if found else default
    if name not in ACTIVATIONS:
        raise PacplanError(f"{path}: activation {name} is not supported (supported: "
                           f"{', '.join(ACTIVATIONS)})")
    return name


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
        layers.append(Layer(w, b))
    return layers


def _single(path: str, state: dict[str, Any], prefix: str) -> Layer:
    w, b = state.get(prefix + ".weight"), state.get(prefix + ".bias")
    if w is None or b is None or w.ndim != 2 or b.shape != (w.shape[0],):
        raise PacplanError(f"{path}: no Linear layer {prefix} in its policy.pth")
    return Layer(w, b)


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
