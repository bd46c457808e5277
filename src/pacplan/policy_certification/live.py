"""Python objects as `pacplan.certify_policy` inputs: a function, a torch module, a
Stable-Baselines3 model or an onnxruntime session as a policy, a function as the cost, an
environment factory or instance as the environment.

Each is identified as far as it can be, because a resumed folder must never mix rows of two
different policies, and the certificate says how far (`ImportedPolicy.source`):

- a top-level function of a file of the user's is identified by that file and every user file
  it imports, as `module:callable` is, and by the values of the module globals it reads (a
  script may set them after import: numbers, strings, arrays, containers of them, torch
  modules and SB3 models by their weights) (source 'file');
- a torch module by its class's files, torch's version, its weights and every submodule's
  other attributes; an SB3 model by its class's files, its library's version and its weights
  and statistics (source 'object': stable, but there is no file to re-check);
- an onnxruntime session made from a file is that file, and must compute what the file does
  (source 'file');
- anything whose state is in no file (a lambda, a closure, a bound method, a callable object,
  an environment instance, a function reading a global no value stands for) gets a random
  sha256 (source 'unidentified'): it is certified, the certificate says it cannot be
  re-verified from files, and a folder made with it cannot be resumed, since nothing could
  tell whether the object is still the same.
"""

from __future__ import annotations

import enum
import hashlib
import inspect
import types
import uuid
from collections.abc import Callable
from importlib import metadata
from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError
from pacplan.io.user_code import calling_user_code, user_code_sha256, user_files
from pacplan.policy_certification.kinds import PolicyKind
from pacplan.policy_certification.policies import ImportedPolicy


def describe(obj: Any) -> str:
    """A label for an object: module.qualname where it has one."""
    name = getattr(obj, "__qualname__", None) or type(obj).__qualname__
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{name}"


def function_identity(fn: Any) -> tuple[str, str]:
    """(sha256, source) of a function: a top-level function of a user's file by that file (and
    the user files it imports) and the values of the globals it reads, which a script may have
    set after import; else a random sha256 ('unidentified'), as for a function reading a
    global whose state no value can stand for."""
    top_level = (isinstance(fn, types.FunctionType) and fn.__closure__ is None
                 and "<" not in fn.__qualname__)
    module = getattr(fn, "__module__", None)
    if top_level and isinstance(module, str) and user_files(module):
        state = _globals_digest(fn)
        if state is not None:
            files = user_code_sha256(module, f"{module}:{fn.__qualname__}")
            return (files if not state else
                    hashlib.sha256(f"{files}\n{state}".encode()).hexdigest()), "file"
    return _random_sha256(), "unidentified"


def _globals_digest(fn: types.FunctionType) -> str | None:
    """sha256 of the values of the module globals `fn`'s code names ("" when it reads none
    but modules, functions and classes, which its files and libraries' versions identify);
    None when one is an object with no value to hash."""
    names: set[str] = set()
    codes = [fn.__code__]
    while codes:
        code = codes.pop()
        names.update(code.co_names)
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    digest, read = hashlib.sha256(), False
    for name in sorted(n for n in names if n in fn.__globals__):
        value = fn.__globals__[name]
        if inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value):
            continue
        text = state_text(value)
        if text is None:
            return None
        digest.update(f"\n{name}={text}".encode())
        read = True
    return digest.hexdigest() if read else ""


def state_text(value: Any, depth: int = 0) -> str | None:
    """A value as text that changes whenever it does: numbers, strings, containers of them,
    arrays and tensors (by their bytes), functions and classes (by name), torch modules (by
    weights and attributes); None for anything else (or nested too deep)."""
    if depth > 16:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return f"int {value:x}"  # repr refuses an int of more than 4300 digits
    if value is None or isinstance(value, bool | float | complex | str | bytes):
        return repr(value)
    if isinstance(value, list | tuple | frozenset | set):
        parts = [state_text(v, depth + 1) for v in value]
        if any(p is None for p in parts):
            return None
        parts = sorted(parts) if isinstance(value, set | frozenset) else parts  # type: ignore[arg-type]
        return f"{type(value).__name__}[{', '.join(parts)}]"  # type: ignore[arg-type]
    if isinstance(value, dict):
        items = [(state_text(k, depth + 1), state_text(v, depth + 1)) for k, v in value.items()]
        if any(k is None or v is None for k, v in items):
            return None
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, np.ndarray | np.generic):
        array = np.ascontiguousarray(value)
        if array.dtype.hasobject:
            return None
        return f"array {array.dtype} {array.shape} {hashlib.sha256(array.tobytes()).hexdigest()}"
    if inspect.isroutine(value) or inspect.isclass(value):
        return f"{getattr(value, '__module__', '')}:{getattr(value, '__qualname__', '')}"
    kind = type(value).__module__.partition(".")[0]
    if kind == "torch" and hasattr(value, "detach"):  # a tensor
        return _weights_sha256({"": value})
    if _is_torch_module(value):
        return module_state_sha256(value)
    if _is_sb3_model(value):  # a model loaded at import, read by a policy function
        return _sb3_model(value, 0).sha256
    if isinstance(value, enum.Enum) or kind == "torch":  # torch.dtype, torch.device
        return repr(value)
    if kind == "gymnasium" and hasattr(value, "sample"):  # a space: its bounds in full
        bounds = [state_text(getattr(value, k), depth + 1) for k in ("low", "high", "n")
                  if hasattr(value, k)]
        return None if None in bounds else f"{value!r} {' '.join(bounds)}"  # type: ignore[arg-type]
    return None


def module_state_sha256(module: Any, *parts: str) -> str | None:
    """sha256 of a torch module's weights and of every submodule's other attributes (a scale
    set on the module changes what it computes without changing its state dict); None when
    an attribute is an object with no value to hash."""
    import torch

    internal = set(vars(torch.nn.Module()))
    attributes = []
    for name, sub in module.named_modules():
        for key, value in sorted(vars(sub).items()):
            if key in internal:
                continue
            text = state_text(value, 1)
            if text is None:
                return None
            attributes.append(f"{name}.{key}={text}")
    return _weights_sha256(module.state_dict(), *parts, *attributes)


def _random_sha256() -> str:
    return hashlib.sha256(uuid.uuid4().bytes).hexdigest()


def _weights_sha256(state: dict[str, Any], *parts: str) -> str:
    """sha256 of a torch state dict (names, dtypes, shapes, bytes) and `parts`."""
    digest = hashlib.sha256("\n".join(parts).encode())
    for name in sorted(state):
        tensor = state[name].detach().cpu().contiguous()
        digest.update(f"\n{name}\n{tensor.dtype}\n{tuple(tensor.shape)}\n".encode())
        try:
            digest.update(tensor.numpy().tobytes())
        except TypeError:  # a dtype numpy has not (bfloat16): its exact float64 values
            digest.update(tensor.double().numpy().tobytes())
    return digest.hexdigest()


def _class_files(obj: Any) -> str:
    module = type(obj).__module__
    return user_code_sha256(module, describe(type(obj))) if user_files(module) else ""


def policy_from_object(obj: Any, index: int, observation_space: spaces.Space,
                       action_space: spaces.Space) -> ImportedPolicy:
    """The policy a Python object is (module docstring); `index` names it in messages."""
    if _is_sb3_model(obj):
        return _sb3_model(obj, index)
    if _is_torch_module(obj):
        return _torch_module(obj, index, observation_space, action_space)
    if type(obj).__module__.startswith("onnxruntime") and hasattr(obj, "get_inputs"):
        path = getattr(obj, "_model_path", None)
        if not isinstance(path, str) or not path:
            raise PacplanError(f"policy #{index}: an onnxruntime session made from bytes has no "
                               "file to identify it by: pass the .onnx file's path instead")
        return _session_policy(obj, path, index, observation_space, action_space)
    if callable(obj):
        sha, source = function_identity(obj)
        return ImportedPolicy(f"policy #{index} ({describe(obj)})", PolicyKind.CALLABLE, sha,
                              obj, source)
    raise PacplanError(f"policy #{index} is a {type(obj).__name__}: give a path (.zip, .onnx), "
                       "'module:callable', a function obs -> action, a torch module, a "
                       "Stable-Baselines3 model or an onnxruntime session")


def _session_policy(session: Any, path: str, index: int, observation_space: spaces.Space,
                    action_space: spaces.Space) -> ImportedPolicy:
    """An onnxruntime session as the file it was made from, which is what is rolled out and
    identified; the session must still compute what the file does (on the zero observation
    and three drawn ones), or the file was replaced after the session was made."""
    from pacplan.io.files import read_file_bytes, sha256_bytes
    from pacplan.policy_certification.onnx_file import OnnxPolicy

    data = read_file_bytes(path, f"policy #{index} ({path})")
    onnx = OnnxPolicy(path, data, observation_space, action_space)
    space = spaces.flatten_space(observation_space)
    space.seed(0)
    probes = [np.zeros(space.shape, np.float32), *(space.sample() for _ in range(3))]
    name = session.get_inputs()[0].name
    for x in probes:
        batch = np.nan_to_num(np.asarray(x, np.float32)).reshape(1, -1)
        with calling_user_code(f"policy #{index}: the onnxruntime session failed"):
            mine = np.asarray(session.run(None, {name: batch})[0], np.float64).reshape(-1)
        theirs = onnx.run_raw(batch)
        if mine.shape != theirs.shape or not np.allclose(mine, theirs, rtol=1e-5, atol=1e-6,
                                                         equal_nan=True):
            raise PacplanError(f"policy #{index}: the onnxruntime session computes other "
                               f"outputs than its file {path} (replaced after the session "
                               "was made?): pass the file's path to certify what it holds")
    return ImportedPolicy(path, PolicyKind.ONNX, sha256_bytes(data), onnx.act)


def _is_torch_module(obj: Any) -> bool:
    return any(c.__module__ == "torch.nn.modules.module" and c.__name__ == "Module"
               for c in type(obj).__mro__)


def _is_sb3_model(obj: Any) -> bool:
    return (any(c.__module__.startswith("stable_baselines3.") and c.__name__ == "BaseAlgorithm"
                for c in type(obj).__mro__) and hasattr(obj, "predict"))


def _torch_module(module: Any, index: int, observation_space: spaces.Space,
                  action_space: spaces.Space) -> ImportedPolicy:
    """A torch module on a float32 batch of one flattened observation, its output read as an
    .onnx policy's (`onnx_file.action_from_output`); put in eval mode, without gradients."""
    import torch

    from pacplan.policy_certification.onnx_file import action_from_output

    label = f"policy #{index} ({describe(type(module))})"
    module.train(False)
    sha = module_state_sha256(module, describe(type(module)), _class_files(module),
                              f"torch {torch.__version__}")
    source = "object" if sha is not None else "unidentified"

    def act(obs: Any) -> Any:
        x = np.asarray(spaces.flatten(observation_space, obs), dtype=np.float32)
        with torch.no_grad():
            out = module(torch.as_tensor(x)[None])
        if not isinstance(out, torch.Tensor):
            raise PacplanError(f"{label}: forward returned a {type(out).__name__}, not a tensor")
        return action_from_output(label, out.detach().cpu().double().numpy().reshape(-1), x,
                                  action_space)

    return ImportedPolicy(label, PolicyKind.TORCH, sha or _random_sha256(), act, source,
                          "module")


def _sb3_model(model: Any, index: int) -> ImportedPolicy:
    """SB3's own `predict(obs, deterministic=True)`, on observations normalized as the model's
    VecNormalize (when it has one) normalizes them; identified by its weights and statistics."""
    label = f"policy #{index} ({describe(type(model))})"
    norm = model.get_vec_normalize_env() if hasattr(model, "get_vec_normalize_env") else None
    parts = [describe(type(model)), _class_files(model),
             f"stable-baselines3 {metadata.version('stable-baselines3')}"]
    if norm is not None:
        rms = norm.obs_rms
        stats = np.concatenate([np.ravel(rms.mean), np.ravel(rms.var),
                                [norm.clip_obs, norm.epsilon, float(norm.norm_obs)]])
        parts.append(hashlib.sha256(np.asarray(stats, np.float64).tobytes()).hexdigest())
    # the weights: SB3's policy object holds spaces and its last distribution besides them
    sha = _weights_sha256(model.policy.state_dict(), *parts)

    def act(obs: Any) -> Any:
        seen = norm.normalize_obs(obs) if norm is not None else obs
        return model.predict(seen, deterministic=True)[0]

    detail = "model" + (" with VecNormalize" if norm is not None else "")
    return ImportedPolicy(label, PolicyKind.SB3, sha, act, "object", detail)


def cost_function(fn: Any) -> tuple[str, Callable[[Any], Any], str, str]:
    """(label, function, sha256, source) of a cost given as a Python function."""
    if not callable(fn):
        raise PacplanError(f"cost must be one of return, terminated, success, "
                           f"'module:function' or a function of the episode, got {fn!r}")
    sha, source = function_identity(fn)
    return f"python:{describe(fn)}", fn, sha, source


def env_factory(env: Any) -> tuple[str, Callable[[], Any], str, str]:
    """(label, factory, sha256, source) of an environment given as an instance or a factory
    (a function or class returning one)."""
    import gymnasium as gym

    if isinstance(env, gym.Env):
        return f"python:{describe(type(env))}", lambda: env, _random_sha256(), "unidentified"
    if not callable(env):
        raise PacplanError(f"env_id must be a Gymnasium environment id, 'module:EnvId', a "
                           f"registered EnvSpec, an environment or a factory, got {env!r}")
    sha, source = (function_identity(env) if not inspect.isclass(env)
                   else ((_class_sha(env), "file") if user_files(env.__module__)
                         else (_random_sha256(), "unidentified")))

    def factory() -> Any:
        with calling_user_code(f"environment factory {describe(env)} failed"):
            made = env()
        if not isinstance(made, gym.Env):
            raise PacplanError(f"environment factory {describe(env)} returned a "
                               f"{type(made).__name__}, not a gymnasium.Env")
        return made

    return f"python:{describe(env)}", factory, sha, source


def _class_sha(cls: type) -> str:
    return user_code_sha256(cls.__module__, f"{cls.__module__}:{cls.__qualname__}")
