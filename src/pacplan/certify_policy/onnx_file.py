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
  model-local functions) is refused when the file is read, from its protobuf (`onnx`), before
  onnxruntime sees it;
- graph optimizations are off, so no computation happens while the session is built (constant
  folding would run the model's constant part there, where nothing can stop it);
- every call into onnxruntime runs under a deadline (`RUN_LIMIT_S`) that one watchdog thread
  enforces through `RunOptions.terminate`, and SIGINT/SIGTERM stop the call the same way: the
  main thread is inside onnxruntime, where Python cannot run its signal handlers, so the
  watchdog learns of the signal from the signal wakeup fd. onnxruntime checks `terminate`
  between nodes, so a single node that computes for long finishes first.

A non-finite output (NaN, ±inf) is refused, never turned into an action, as pacplan's own
runtime refuses one. The shapes are checked once on a zero observation when the file is
loaded, so a model of the wrong shape is refused before any rollout.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import threading
import time
from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError

RUN_LIMIT_S = 10.0
"""The longest one call into onnxruntime may run (one observation: an MLP takes microseconds)."""

TICK_S = 0.1
"""How often the watchdog checks the deadlines (signals wake it at once)."""

CONTROL_FLOW = ("Loop", "Scan", "If")
"""Operators a policy does not need that can run without end (with any op holding a graph)."""


def _one_line(exc: BaseException, limit: int = 160) -> str:
    return " ".join(str(exc).split())[:limit]


def check_graph(path: str, data: bytes) -> None:
    """Refuse control flow, read from the protobuf alone (no onnxruntime, nothing runs)."""
    import onnx

    try:
        model = onnx.load_model_from_string(data)
    except Exception as exc:  # protobuf's DecodeError and its kin
        raise PacplanError(f"{path}: not a readable ONNX model ({_one_line(exc)})") from None
    places = [("graph", model.graph.node)]
    places += [(f"function {f.domain + '.' if f.domain else ''}{f.name}", f.node)
               for f in model.functions]
    for where, nodes in places:
        for i, node in enumerate(nodes):
            subgraph = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
                           for a in node.attribute)
            if node.op_type in CONTROL_FLOW or subgraph:
                name = repr(node.name) if node.name else f"#{i}"
                raise PacplanError(f"{path}: node {name} ({node.op_type}) in its {where} is "
                                   "control flow (Loop, Scan, If or a subgraph), which a policy "
                                   "does not need and which can run without end: refused")


class _Call:
    """One call into onnxruntime the watchdog may stop; `stopped` says why it did."""

    __slots__ = ("deadline", "options", "stopped")

    def __init__(self, options: Any, deadline: float) -> None:
        self.options, self.deadline, self.stopped = options, deadline, ""

    def stop(self, why: str) -> None:
        self.stopped = self.stopped or why
        self.options.terminate = True


class _Watchdog:
    """One daemon thread for the whole process: it stops the calls in flight that pass their
    deadline, and all of them on SIGINT/SIGTERM. The main thread pays only for registering a
    call (a thread handoff per call would cost far more than a small MLP's run)."""

    def __init__(self) -> None:
        self.calls: set[_Call] = set()
        # CPython's signal handler writes each signal's number to the writer (the signal
        # wakeup fd), from whatever thread the signal lands on
        self._reader, self._writer = socket.socketpair()
        self._reader.settimeout(TICK_S)  # a tick without a signal (poll(): no FD_SETSIZE)
        self._writer.setblocking(False)  # as set_wakeup_fd requires
        threading.Thread(target=self._loop, name="pacplan-onnx-watchdog", daemon=True).start()

    def claim_signals(self) -> None:
        """Point the signal wakeup fd here, unless another user holds it (an asyncio loop):
        then, or off the main thread, only deadlines stop calls."""
        if threading.current_thread() is not threading.main_thread():
            return
        mine = self._writer.fileno()
        previous = signal.set_wakeup_fd(mine, warn_on_full_buffer=False)
        if previous not in (-1, mine):
            signal.set_wakeup_fd(previous)

    def _loop(self) -> None:
        wanted = {int(signal.SIGINT), int(signal.SIGTERM)}
        while True:
            signalled = False
            try:
                signalled = not wanted.isdisjoint(self._reader.recv(512))
            except TimeoutError:
                pass
            except OSError:  # never seen; still no busy loop
                time.sleep(TICK_S)
            now = time.monotonic()
            for call in tuple(self.calls):
                if signalled:
                    call.stop("signal")
                elif now > call.deadline:
                    call.stop("time")

    def forget(self) -> None:
        """In a forked child: the thread is gone, and the sockets are the parent's."""
        with contextlib.suppress(ValueError):  # not the main thread
            previous = signal.set_wakeup_fd(-1)
            if previous != self._writer.fileno():
                signal.set_wakeup_fd(previous)
        self._writer.close()
        self._reader.close()


_WATCHDOG: _Watchdog | None = None


def _watchdog() -> _Watchdog:
    global _WATCHDOG
    if _WATCHDOG is None:
        _WATCHDOG = _Watchdog()
    return _WATCHDOG


def _after_fork_in_child() -> None:
    global _WATCHDOG
    if _WATCHDOG is not None:
        _WATCHDOG.forget()
        _WATCHDOG = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
        check_graph(path, data)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # one observation at a time: threads only cost
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            self._session = ort.InferenceSession(data, options,
                                                 providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for a bad model
            raise PacplanError(f"{path}: not a readable ONNX model ({_one_line(exc)})") from None
        self._run_options = ort.RunOptions
        self._input = self._session.get_inputs()[0].name
        self._obs_space, self._action_space = observation_space, action_space
        if not isinstance(action_space, spaces.Discrete | spaces.Box):
            raise PacplanError(f"{path}: action space {action_space} is not supported (Discrete "
                               "or Box)")
        _watchdog().claim_signals()  # the loading (main) thread can take the wakeup fd
        # the shapes only: a model may be undefined (NaN) at the zero observation
        self._shape_checked(self._run(np.zeros((1, spaces.flatdim(observation_space)),
                                               np.float32), "the zero observation at load"))

    def act(self, obs: Any, flat: bool = False) -> Any:
        """The action for one observation (`flat`: already flattened)."""
        x = obs if flat else spaces.flatten(self._obs_space, obs)
        x = np.asarray(x, dtype=np.float32).reshape(1, -1)
        return action_from_output(self.label, self._run(x, "an observation"), x[0],
                                  self._action_space)

    def _run(self, x: np.ndarray, what: str) -> np.ndarray:
        """The model's first output on the batch `x`, the call under the watchdog: past
        `RUN_LIMIT_S` it is stopped with a PacplanError, on SIGINT/SIGTERM with
        KeyboardInterrupt (the CLI turns SIGTERM into one)."""
        options = self._run_options()
        call = _Call(options, time.monotonic() + RUN_LIMIT_S)
        calls = _watchdog().calls  # not kept: a forked child starts its own
        try:
            calls.add(call)
            out = self._session.run(None, {self._input: x}, options)[0]
        except Exception as exc:
            if call.stopped == "signal":
                raise KeyboardInterrupt from None
            if call.stopped == "time":
                raise PacplanError(f"{self.label}: the model ran past the {RUN_LIMIT_S:g} s "
                                   f"limit on {what} and was stopped (a policy acts in "
                                   "milliseconds)") from None
            raise PacplanError(f"{self.label}: the model does not take a float32 batch of "
                               f"{x.shape[1]} observation values ({_one_line(exc)})") from None
        finally:
            calls.discard(call)
        return np.asarray(out, dtype=np.float64).reshape(-1)

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
