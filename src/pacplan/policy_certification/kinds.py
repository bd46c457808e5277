"""What kind of thing a certified policy is, as code dispatches on it: an `.onnx` file, a
Stable-Baselines3 model (a `.zip`, or a model object), a torch module, or Python code
(`module:callable`, a function).

A certificate records each policy's kind as a short description ('onnx', 'callable',
'sb3 PPO MLP (tanh)', 'sb3 model with VecNormalize', 'torch module') whose first word is its
`PolicyKind`'s value; `PolicyKind.of` reads it back, in this one place, so the recorded text
(and every certificate already written) stays as it is.
"""

from __future__ import annotations

import enum


class PolicyKind(enum.Enum):
    """A policy's kind: what can export it, and whether a file holds it."""

    ONNX = "onnx"
    SB3 = "sb3"
    TORCH = "torch"
    CALLABLE = "callable"

    @classmethod
    def of(cls, recorded: object) -> PolicyKind | None:
        """The kind a record's description names (its first word), None for any other."""
        if not isinstance(recorded, str):
            return None
        try:
            return cls(recorded.partition(" ")[0])
        except ValueError:
            return None

    def described(self, detail: str = "") -> str:
        """The record's description: the kind, then what else is known ('PPO MLP (tanh)')."""
        return f"{self.value} {detail}" if detail else self.value

    @property
    def runtime_runs(self) -> bool:
        """Whether `pacplan export` can give it to the runtime (an ONNX model, as is or
        converted); Python code (a callable, a torch module) cannot be."""
        return self in (PolicyKind.ONNX, PolicyKind.SB3)

    @property
    def converted(self) -> bool:
        """Whether export converts it to ONNX (the certified file is then the evidence)."""
        return self is PolicyKind.SB3
