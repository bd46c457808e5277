"""An `.onnx` policy run with onnxruntime, under one documented convention.

The model's first input takes a float32 batch of flattened observations, shape (batch,
obs_dim) (a dynamic or fixed batch of 1); its first output is, per observation:

- for a `Discrete(n, start)` action space: n scores (logits or Q-values), the action being
  start + argmax, or 1 number, the action index itself (start + its rounded value);
- for a `Box` action space: the action's values (its flattened size), clipped to the box as
  Stable-Baselines3's `predict` clips a Gaussian policy's mean.

An ONNX file is a protobuf of operators, not code: reading one runs nothing of its author's.
The convention is checked once on a zero observation when the file is loaded, so a model of
the wrong shape is refused before any rollout.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError


class OnnxPolicy:
    """A deterministic policy from an ONNX file (module docstring)."""

    kind = "onnx"

    def __init__(self, path: str, data: bytes, observation_space: spaces.Space,
                 action_space: spaces.Space) -> None:
        self.label = path
        try:
            import onnxruntime as ort
        except ImportError:
            raise PacplanError(f"{path}: reading an .onnx policy needs onnxruntime (pip install "
                               "onnxruntime)") from None
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # one observation at a time: threads only cost
        options.log_severity_level = 3
        try:
            self._session = ort.InferenceSession(data, options,
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for a bad model
            reason = " ".join(str(exc).split())[:160]
            raise PacplanError(f"{path}: not a readable ONNX model ({reason})") from None
        self._input = self._session.get_inputs()[0].name
        self._obs_space, self._action_space = observation_space, action_space
        if not isinstance(action_space, spaces.Discrete | spaces.Box):
            raise PacplanError(f"{path}: action space {action_space} is not supported (Discrete "
                               "or Box)")
        self.act(np.zeros(spaces.flatdim(observation_space), np.float32), flat=True)

    def act(self, obs: Any, flat: bool = False) -> Any:
        """The action for one observation (`flat`: already flattened)."""
        x = obs if flat else spaces.flatten(self._obs_space, obs)
        x = np.asarray(x, dtype=np.float32).reshape(1, -1)
        try:
            out = np.asarray(self._session.run(None, {self._input: x})[0], dtype=np.float64)
        except Exception as exc:
            reason = " ".join(str(exc).split())[:160]
            raise PacplanError(f"{self.label}: the model does not take a float32 batch of "
                               f"{x.shape[1]} observation values ({reason})") from None
        out = out.reshape(-1)
        space = self._action_space
        if isinstance(space, spaces.Discrete):
            if out.size == int(space.n):
                return np.int64(int(space.start) + int(np.argmax(out)))
            if out.size == 1 and np.isfinite(out[0]):
                index = round(float(out[0]))
                if 0 <= index < int(space.n):
                    return np.int64(int(space.start) + index)
                raise PacplanError(f"{self.label}: action index {out[0]!r} is outside "
                                   f"{space}")
            raise PacplanError(f"{self.label}: the model gives {out.size} outputs; {space} "
                               f"needs {int(space.n)} scores or 1 action index")
        assert isinstance(space, spaces.Box)
        want = int(np.prod(space.shape))
        if out.size != want:
            raise PacplanError(f"{self.label}: the model gives {out.size} outputs; {space} "
                               f"needs {want}")
        action = np.clip(out.reshape(space.shape), space.low, space.high)
        return action.astype(space.dtype)
