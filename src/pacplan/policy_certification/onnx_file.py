"""An `.onnx` policy run with onnxruntime, under one documented convention.

The model's first input takes a float32 batch of flattened observations, shape (batch,
obs_dim) (a dynamic or fixed batch of 1); its first output is, per observation:

- for a `Discrete(n, start)` action space: n scores (logits or Q-values), the action being
  start + argmax, or 1 number, the action index itself (start + its rounded value);
- for a `Box` action space: the action's values (its flattened size), clipped to the box as
  Stable-Baselines3's `predict` clips a Gaussian policy's mean.

An ONNX file is a protobuf of operators, not code: reading one runs nothing of its author's.
It can still be built to run for ever, so a model is held to what a policy needs:

- control flow (Loop, Scan, If, or any node carrying a subgraph, in the graph or in its
  model-local functions) is refused when the file is read, from its protobuf
  (`pacplan_runtime.onnx_graph`), before onnxruntime sees it;
- the models run in a child process of their own (`onnx_server`), with graph optimizations
  off, so building a session computes nothing; every call has a deadline (`RUN_LIMIT_S`, and
  `LOAD_LIMIT_S` to build the session), and a call past it is ended by killing that process:
  onnxruntime checks `RunOptions.terminate` only between nodes, so one slow node used to run
  on regardless. SIGINT/SIGTERM reach pacplan while it waits for the child, so Ctrl-C stops a
  call in flight too; the child is started again for the next call;
- an output that is not a tensor of numbers (strings, a ZipMap's sequence of maps) is refused
  in one line.

A non-finite output (NaN, ±inf) is refused, never turned into an action, as pacplan's own
runtime refuses one. The shapes are checked once on a zero observation when the file is
loaded, so a model of the wrong shape is refused before any rollout.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import itertools
import math
import os
import select
import struct
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError
from pacplan.policy_certification.onnx_server import FAIL, HEADER, frame

RUN_LIMIT_S = 10.0
"""The longest one call into onnxruntime may run (one observation: an MLP takes microseconds)."""

LOAD_LIMIT_S = 60.0
"""The longest building a model's session may take (it computes nothing; a large file parses)."""

_START = ("import sys; sys.path[:] = [p for p in sys.path if p not in ('', '.')]; "
          "from pacplan.policy_certification.onnx_server import main; main()")
"""The child's command: the working folder is not on its path (a user's `onnx.py` there is
never imported)."""


def check_graph(path: str, data: bytes) -> None:
    """Refuse control flow, read from the protobuf alone (nothing runs), as the runtime does."""
    from pacplan_runtime.onnx_graph import refusal

    refused = refusal(data)
    if refused is not None:
        raise PacplanError(f"{path}: {refused}")


class _Stopped(Exception):
    """The child was killed at a call's deadline."""


class _Server:
    """The child process that runs every `.onnx` policy of this process (one, however many
    policies: a child each would cost memory per policy). A fork gets its own at first use."""

    _generations = itertools.count()

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.generation = next(self._generations)
        self.lock = threading.Lock()
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", _START], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                         close_fds=True)
        except OSError as exc:
            raise PacplanError(f"cannot start the process that runs .onnx policies "
                               f"({exc.strerror or exc})") from None

    def call(self, op: bytes, handle: int, payload: bytes, limit: float) -> tuple[bool, bytes]:
        """(ok, answer) of one frame; the child is killed when the answer is not back within
        `limit` seconds (`_Stopped`) or the wait is interrupted (Ctrl-C)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock:  # one frame at a time, whichever thread acts
            deadline = time.monotonic() + limit
            try:
                self.proc.stdin.write(frame(op, handle, payload))
                self.proc.stdin.flush()
                answer = self._read_frame(deadline)
            except BrokenPipeError:
                self.kill()
                raise PacplanError("the process that runs .onnx policies ended unexpectedly "
                                   f"(exit status {self.proc.poll()})") from None
            except BaseException:
                self.kill()
                raise
        return answer[:1] != FAIL, answer[1:]

    def _read_frame(self, deadline: float) -> bytes:
        """The payload of the child's next frame, read as it arrives (a frame usually comes in
        one read), waiting at most until `deadline`."""
        assert self.proc.stdout is not None
        fd, got, need = self.proc.stdout.fileno(), bytearray(), HEADER.size
        while len(got) < need:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([fd], [], [], wait)[0]:
                raise _Stopped
            chunk = os.read(fd, max(need - len(got), 1 << 16))
            if not chunk:
                raise PacplanError("the process that runs .onnx policies ended unexpectedly "
                                   f"(exit status {self.proc.poll()})")
            got += chunk
            if need == HEADER.size and len(got) >= HEADER.size:
                need += HEADER.unpack_from(got)[2]
        return bytes(got[HEADER.size:need])

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for pipe in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if pipe is not None:
                    pipe.close()
        self.pid = -1  # never used again


_SERVER: _Server | None = None
_STARTING = threading.Lock()


def _server() -> _Server:
    global _SERVER
    server = _SERVER
    if server is not None and server.pid == os.getpid():  # killed ones have pid -1
        return server
    with _STARTING:
        if _SERVER is None or _SERVER.pid != os.getpid():
            _SERVER = _Server()
        return _SERVER


@atexit.register
def _stop_server() -> None:
    if _SERVER is not None and _SERVER.pid == os.getpid():
        _SERVER.kill()


class OnnxPolicy:
    """A deterministic policy from an ONNX file (module docstring)."""

    def __init__(self, path: str, data: bytes, observation_space: spaces.Space,
                 action_space: spaces.Space) -> None:
        self.label = path
        if importlib.util.find_spec("onnxruntime") is None:  # the child imports it
            raise PacplanError(f"{path}: reading an .onnx policy needs onnxruntime (pip install "
                               "onnxruntime)")
        from pacplan.worlds.from_gym.policies import flat_size

        size = flat_size(observation_space, f"{path}: an .onnx policy", "certify a "
                         "'module:callable' policy, which is handed the raw observation")
        check_graph(path, data)
        self._data = data
        self._handle, self._generation = -1, -1
        self._obs_space, self._action_space = observation_space, action_space
        if not isinstance(action_space, spaces.Discrete | spaces.Box):
            raise PacplanError(f"{path}: action space {action_space} is not supported (Discrete "
                               "or Box)")
        # the shapes only: a model may be undefined (NaN) at the zero observation
        self._shape_checked(self._run(np.zeros((1, size), np.float32),
                                      "the zero observation at load"))

    def act(self, obs: Any, flat: bool = False) -> Any:
        """The action for one observation (`flat`: already flattened)."""
        x = obs if flat else spaces.flatten(self._obs_space, obs)
        x = np.asarray(x, dtype=np.float32).reshape(1, -1)
        return action_from_output(self.label, self._run(x, "an observation"), x[0],
                                  self._action_space)

    def run_raw(self, x: np.ndarray) -> np.ndarray:
        """The model's first output, flat, on the float32 batch `x` (a check's probe)."""
        return self._run(x, "a probe observation")

    def _session(self) -> tuple[_Server, int]:
        """The child and this model's handle there, loading the model into a new child."""
        server = _server()
        if self._generation != server.generation:
            ok, answer = self._call(server, b"L", 0, self._data, LOAD_LIMIT_S,
                                    "building its session")
            if not ok:
                raise PacplanError(f"{self.label}: {answer.decode(errors='replace')}")
            self._handle, self._generation = struct.unpack("<I", answer)[0], server.generation
        return server, self._handle

    def _call(self, server: _Server, op: bytes, handle: int, payload: bytes, limit: float,
              what: str) -> tuple[bool, bytes]:
        try:
            return server.call(op, handle, payload, limit)
        except _Stopped:
            raise PacplanError(f"{self.label}: the model ran past the {limit:g} s limit on "
                               f"{what} and was stopped (a policy acts in milliseconds)"
                               ) from None

    def _run(self, x: np.ndarray, what: str) -> np.ndarray:
        """The model's first output on the batch `x`, in the child under `RUN_LIMIT_S`: past
        it, a PacplanError; Ctrl-C (or SIGTERM, which the CLI turns into one) while waiting
        stops the call as KeyboardInterrupt."""
        server, handle = self._session()
        ok, answer = self._call(server, b"R", handle, np.ascontiguousarray(x, np.float32)
                                .tobytes(), RUN_LIMIT_S, what)
        if not ok:
            raise PacplanError(f"{self.label}: {answer.decode(errors='replace')}")
        return np.frombuffer(answer, dtype=np.float64).copy()

    def _shape_checked(self, out: np.ndarray) -> np.ndarray:
        return shape_checked(self.label, out, self._action_space)


def shape_checked(label: str, out: np.ndarray, space: spaces.Space) -> np.ndarray:
    """A network's flat output, if its size fits the convention for `space`."""
    if isinstance(space, spaces.Discrete):
        if out.size not in (int(space.n), 1):
            raise PacplanError(f"{label}: the model gives {out.size} outputs; {space} "
                               f"needs {int(space.n)} scores or 1 action index")
        return out
    want = int(np.prod(space.shape))
    if out.size != want:
        raise PacplanError(f"{label}: the model gives {out.size} outputs; {space} needs {want}")
    return out


def action_from_output(label: str, out: np.ndarray, x: np.ndarray, space: spaces.Space) -> Any:
    """The action a network's flat output `out` on observation `x` means under the module's
    convention (start + argmax of n scores, or 1 index; a Box's values clipped to it); a
    non-finite output is refused, never argmax-ed or clipped."""
    out = shape_checked(label, out, space)
    if not all(map(math.isfinite, out.tolist())):  # NaN or ±inf: no argmax, no clip
        shown = np.array2string(x, precision=4, threshold=8, max_line_width=10**6)
        raise PacplanError(f"{label}: the model gave a non-finite output "
                           f"({out[~np.isfinite(out)][0]}) for observation {shown}; no "
                           "action is taken from it")
    if isinstance(space, spaces.Discrete):
        if out.size == int(space.n):
            return np.int64(int(space.start) + int(np.argmax(out)))
        index = round(float(out[0]))
        if 0 <= index < int(space.n):
            return np.int64(int(space.start) + index)
        raise PacplanError(f"{label}: action index {out[0]!r} is outside {space}")
    assert isinstance(space, spaces.Box)
    action = np.clip(out.reshape(space.shape), space.low, space.high)
    return action.astype(space.dtype)
