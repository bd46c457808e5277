"""A POLICY argument of `certify-policy` as something that acts: an SB3 `.zip`, an `.onnx` file
or a `module:callable`, each identified by a sha256 for the run's record.

A file is read once, so the bytes hashed are the bytes used. A callable is called with the
environment's observation as the environment returns it and must return an action the
environment accepts; its identity is the sha256 of every user file its module imports
(`pacplan.io.user_code`), so a changed policy, or a changed helper module it imports, is never
mistaken for the one a resumed run started with.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gymnasium import spaces

from pacplan.errors import PacplanError
from pacplan.io.files import read_file_bytes, sha256_bytes
from pacplan.policy_certification.kinds import PolicyKind


@dataclass(frozen=True)
class ImportedPolicy:
    """A policy that acts on one observation: `act(obs) -> action`."""

    label: str
    kind: PolicyKind
    sha256: str
    act: Callable[[Any], Any]
    source: str = "file"
    """'file' (a path or module:callable: re-checkable from files), 'object' (a Python object
    identified by its code's files and its weights), or 'unidentified' (a lambda, a closure, a
    callable object: its state is in no file, so its sha256 is drawn at random)."""
    detail: str = ""
    """What else its record says of it after the kind ('PPO MLP (tanh)')."""

    def record(self) -> dict[str, Any]:
        """What the policy is, wherever its file lies: a run's identity holds this."""
        record: dict[str, Any] = {"kind": self.kind.described(self.detail),
                                  "sha256": self.sha256}
        if self.source != "file":
            record["source"] = self.source
        return record


def load_policy(spec: str, observation_space: spaces.Space, action_space: spaces.Space,
                normalization: str = "obs_normalization") -> ImportedPolicy:
    """The policy named by `spec`, checked against the environment's spaces; `normalization`
    is how the caller names the option a refused pickle of statistics belongs in."""
    path = Path(spec)
    if path.is_file():
        return _from_file(spec, observation_space, action_space, normalization)
    if path.exists():
        raise PacplanError(f"policy {spec} is not a regular file")
    module, sep, name = spec.partition(":")
    if sep and module and name and os.sep not in module and path.suffix not in (".zip",
                                                                                  ".onnx"):
        return _from_callable(spec)
    raise PacplanError(f"policy {spec!r} is not a Stable-Baselines3 .zip, an .onnx file or a "
                       "'module:callable' (no such file)")


def _from_file(spec: str, observation_space: spaces.Space, action_space: spaces.Space,
               normalization: str) -> ImportedPolicy:
    data = read_file_bytes(spec, f"policy {spec}")
    digest = sha256_bytes(data)
    suffix = Path(spec).suffix.lower()
    if suffix == ".onnx":
        from pacplan.policy_certification.onnx_file import OnnxPolicy

        onnx = OnnxPolicy(spec, data, observation_space, action_space)
        return ImportedPolicy(spec, PolicyKind.ONNX, digest, onnx.act)
    if suffix == ".zip" or data[:4] == b"PK\x03\x04":
        from pacplan.policy_certification.stable_baselines import SB3Policy

        sb3 = SB3Policy(spec, data, observation_space, action_space)
        return ImportedPolicy(spec, PolicyKind.SB3, digest, sb3.act, detail=sb3.detail)
    hint = (" (VecNormalize statistics are a pickle, which pacplan never loads: convert them "
            f"to an .npz and pass it with {normalization}, docs/certify-policy.md)"
            if suffix in (".pkl", ".pickle") else "")
    raise PacplanError(f"policy {spec} is not a Stable-Baselines3 .zip, an .onnx file or a "
                       f"'module:callable'{hint}")


def _from_callable(spec: str) -> ImportedPolicy:
    from pacplan.io.user_code import import_target, user_code_sha256

    fn = import_target(spec, f"policy {spec!r}")
    if not callable(fn):
        raise PacplanError(f"policy {spec!r} is not callable")
    # the module's files and the name within it (hashed with them): two callables differ
    return ImportedPolicy(spec, PolicyKind.CALLABLE,
                          user_code_sha256(spec.partition(":")[0], spec), fn)
