"""The child process that runs `.onnx` policies for `onnx_file`: killed when a call passes its
limit, which onnxruntime itself cannot guarantee (it checks `RunOptions.terminate` only between
nodes, so one slow node, a NonMaxSuppression over 100,000 boxes, ran 22 s past a 10 s limit).

It reads frames from stdin and answers each on stdout; it writes nothing else there, ignores
SIGINT and SIGTERM (its parent decides when it stops, and a Ctrl-C meant for the parent must
not end it first), and dies with its parent (Linux's parent-death signal, else at the next
read of a closed stdin). A frame is a 1-byte op, a 4-byte handle and an 8-byte length (little
endian), then that many bytes:

    L  model bytes            -> 0 + handle            | 1 + a one-line reason (UTF-8)
    R  float32 batch (1, d)   -> 0 + float64 values    | 1 + a one-line reason

No pickle crosses the pipe: only the raw bytes of arrays and of the model.
"""

from __future__ import annotations

import os
import signal
import struct
import sys
from typing import Any, BinaryIO

HEADER = struct.Struct("<cIQ")
"""op (1 byte), handle (uint32), payload length (uint64)."""

OK, FAIL = b"\x00", b"\x01"


def frame(op: bytes, handle: int, payload: bytes) -> bytes:
    return HEADER.pack(op, handle, len(payload)) + payload


def _read_exactly(stream: BinaryIO, size: int) -> bytes | None:
    data = stream.read(size)
    return data if data is not None and len(data) == size else None


def _one_line(exc: BaseException, limit: int = 160) -> str:
    return " ".join(str(exc).split())[:limit]


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (a kill -9 of pacplan leaves no
    orphan computing a slow node); elsewhere the closed stdin ends it at the next read."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(0)


class _Sessions:
    def __init__(self) -> None:
        import numpy as np
        import onnxruntime as ort

        from pacplan_runtime.decide import output_problem

        self.np, self.ort, self.output_problem = np, ort, output_problem
        self.sessions: list[tuple[Any, str]] = []

    def load(self, data: bytes) -> bytes:
        options = self.ort.SessionOptions()
        options.intra_op_num_threads = 1  # one observation at a time: threads only cost
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # no constant folding: building the session computes nothing of the model
        options.graph_optimization_level = self.ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            session = self.ort.InferenceSession(data, options,
                                                providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own types for a bad model
            return FAIL + f"not a readable ONNX model ({_one_line(exc)})".encode()
        self.sessions.append((session, session.get_inputs()[0].name))
        return OK + struct.pack("<I", len(self.sessions) - 1)

    def run(self, handle: int, payload: bytes) -> bytes:
        if handle >= len(self.sessions):
            return FAIL + b"no such model"
        session, name = self.sessions[handle]
        x = self.np.frombuffer(payload, dtype=self.np.float32).reshape(1, -1)
        try:
            out = session.run(None, {name: x})[0]
        except Exception as exc:  # onnxruntime's own error types
            return FAIL + (f"the model does not take a float32 batch of {x.shape[1]} "
                           f"observation values ({_one_line(exc)})").encode()
        problem = self.output_problem(out)
        if problem is not None:
            return FAIL + problem.encode()
        return OK + self.np.asarray(out, dtype=self.np.float64).reshape(-1).tobytes()


def main() -> None:
    """Serve frames until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print (an import's) cannot corrupt a frame
    sessions = _Sessions()
    while (head := _read_exactly(stdin, HEADER.size)) is not None:
        op, handle, size = HEADER.unpack(head)
        payload = _read_exactly(stdin, size) if size else b""
        if payload is None:
            break
        answer = sessions.load(payload) if op == b"L" else sessions.run(handle, payload)
        stdout.write(frame(op, handle, answer))
        stdout.flush()


if __name__ == "__main__":
    main()
