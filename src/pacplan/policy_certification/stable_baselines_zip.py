"""What a Stable-Baselines3 `.zip` says about its policy, read without unpickling anything:
its members, the `data` JSON, and the classes its pickled fields name, found by disassembling
them with `pickletools.genops` (which lists what a pickle refers to without executing it).

Only SB3's own policy classes and torch's own activation classes, named by reference, are
accepted: a class of the user's (even one named `Tanh`), a subclass pickled by value or a
`functools.partial` runs code of its own when SB3 loads the file, so what pacplan would rebuild
is not what SB3 would run; each is refused in one line naming it.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickletools
import re
import zipfile
from typing import Any

from pacplan.errors import PacplanError

MAX_MEMBER_BYTES = 1 << 30
"""The largest zip member read (a policy.pth of a billion bytes is no MLP policy)."""

ACTIVATIONS = ("Tanh", "ReLU", "ELU", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Softplus",
               "Mish", "SELU", "CELU", "Hardtanh", "ReLU6", "Identity")
"""torch.nn activations (built with their default arguments, as SB3's policies build them)."""

_ALGORITHMS = {  # the policy class SB3 saves -> (algorithm family, default activation)
    ("stable_baselines3.common.policies", "ActorCriticPolicy"): ("actor-critic", "Tanh"),
    ("stable_baselines3.dqn.policies", "DQNPolicy"): ("dqn", "ReLU"),
    ("stable_baselines3.sac.policies", "SACPolicy"): ("sac", "ReLU"),
    ("stable_baselines3.td3.policies", "TD3Policy"): ("td3", "ReLU"),
}

_FLATTEN = ("stable_baselines3.common.torch_layers", "FlattenExtractor")

_CLASS_TEXT = re.compile(r"<class '([A-Za-z_][\w.]*)\.([A-Za-z_]\w*)'>")
"""How SB3 writes a class beside its pickle: str(cls)."""


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


def open_zip(path: str, data: bytes) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise PacplanError(f"{path}: not a Stable-Baselines3 .zip (not a zip archive)") from None


def read_member(path: str, archive: zipfile.ZipFile, name: str) -> bytes:
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


def read_data_json(path: str, raw: bytes) -> dict[str, Any]:
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise PacplanError(f"{path}: its 'data' member is not SB3's JSON") from None
    if not isinstance(meta, dict):
        raise PacplanError(f"{path}: its 'data' member is not SB3's JSON object")
    return meta


def serialized_globals(path: str, meta: dict[str, Any], key: str,
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


def algorithm_of(path: str, policy_class: list[tuple[str, str]]) -> tuple[str, str]:
    """(algorithm family, default activation) from the saved policy class: SB3's own class by
    reference, the one global its pickle names (a class of the user's, even a subclass of
    SB3's, pickled by value, names cloudpickle's machinery and SB3's class as its base)."""
    if len(set(policy_class)) == 1 and policy_class[0] in _ALGORITHMS:
        return _ALGORITHMS[policy_class[0]]
    named = ", ".join(dict.fromkeys(f"{m}.{n}" for m, n in policy_class)) or "nothing"
    raise PacplanError(f"{path}: policy class {named} is not supported: certify-policy reads "
                       "the MLP policies of PPO, A2C, DQN, SAC and TD3 (no CNN, MultiInput or "
                       "recurrent policies)")


def refuse_extractor(path: str, kwargs: dict[str, Any],
                      kwargs_globals: list[tuple[str, str]]) -> None:
    named = [n for _, n in kwargs_globals if n.endswith("Extractor") and n != "FlattenExtractor"]
    text = str(kwargs.get("features_extractor_class", ""))
    if named or (text and "FlattenExtractor" not in text):
        raise PacplanError(f"{path}: features extractor {named[0] if named else text} is not "
                           "supported: certify-policy reads MLP policies on flattened "
                           "observations")


def activation_of(path: str, kwargs: dict[str, Any], kwargs_globals: list[tuple[str, str]],
                default: str) -> str:
    """The activation SB3 would build the policy with, from the pickle of policy_kwargs (what
    SB3 loads) checked against the text SB3 writes beside it; only torch's own classes."""
    text = kwargs.get("activation_fn")
    said = None
    if text is not None:
        match = _CLASS_TEXT.fullmatch(str(text))
        if match is None:
            raise PacplanError(f"{path}: activation_fn {str(text)[:80]!r} is not a class "
                               "(certify-policy reads torch's own activation classes)")
        said = (match[1], match[2])
        _check_torch_activation(path, *said, "activation")
    pickled = []
    for module, name in kwargs_globals:  # the optimizer plays no part in acting
        if (module, name) == _FLATTEN or module.startswith("torch.optim."):
            continue
        _check_torch_activation(path, module, name, "policy_kwargs names class")
        pickled.append((module, name))
    named = ", ".join(dict.fromkeys(f"{m}.{n}" for m, n in pickled)) or "no activation"
    if len(set(pickled)) > 1:
        raise PacplanError(f"{path}: policy_kwargs names several activations ({named}): not "
                           "a policy SB3 builds")
    if said is not None and set(pickled) != {said}:
        raise PacplanError(f"{path}: policy_kwargs' pickle names {named} but its text says "
                           f"activation_fn {text}: not a file SB3 wrote")
    return pickled[0][1] if pickled else default


def _check_torch_activation(path: str, module: str, name: str, what: str) -> None:
    """`module.name` is torch's own activation class: torch.nn.<name>, defined in `module`."""
    import torch

    own = getattr(torch.nn, name, None) if name in ACTIVATIONS else None
    if own is None or own.__module__ != module or not module.startswith("torch.nn.modules."):
        raise PacplanError(f"{path}: {what} {module}.{name} (module {module}), which SB3 would "
                           "run: certify-policy reads only torch's own activation classes "
                           f"(torch.nn.modules: {', '.join(ACTIVATIONS)})")
