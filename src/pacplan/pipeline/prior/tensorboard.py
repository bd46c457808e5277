"""ES training as TensorBoard scalars in RUN/tensorboard/, when `tensorboard` is installed.

Automatic: with the package installed (`pip install "pacplan[tensorboard]"`) every training run
writes its per-iteration metrics there, `tensorboard --logdir RUN/tensorboard` shows them; set
PACPLAN_TENSORBOARD=0 to write none. Each numeric field of a metrics.jsonl record (cost, best,
σ statistics, gradient and μ norms, eval_cost, …; `utility` as 0/1) is the scalar `es/<field>`
at step = its iteration.

The folder is a view of metrics.jsonl, never an artifact: nothing hashes, verifies, compares or
exports it, and it is rebuilt from metrics.jsonl each time training starts or resumes (its event
files are replaced by one holding the records kept, then one event per new iteration). So a
resumed run shows each iteration once, even the one a crash cut between its log line and its
checkpoint. Written with tensorboard's own event writer, so torch is not imported for it.
"""

from __future__ import annotations

import importlib.util
import math
import os
import time
from pathlib import Path
from typing import Any

from pacplan.pipeline.rundir import RunDir

FOLDER = RunDir.TENSORBOARD
"""The run directory's TensorBoard folder."""
SWITCH = "PACPLAN_TENSORBOARD"
"""Environment variable: "0" writes no TensorBoard log even with tensorboard installed."""
PREFIX = "es/"
_NOT_SCALARS = frozenset({"iteration"})
_EVENT_FILES = "events.out.tfevents.*"


def enabled() -> bool:
    """Whether training writes the log: tensorboard importable and not switched off."""
    if os.environ.get(SWITCH, "").strip() == "0":
        return False
    return importlib.util.find_spec("tensorboard") is not None


def scalars(record: dict[str, Any]) -> dict[str, float]:
    """The record's numeric fields as TensorBoard tags and values (booleans as 0/1)."""
    out = {}
    for key, value in record.items():
        if key in _NOT_SCALARS or not isinstance(value, int | float):
            continue
        if math.isfinite(float(value)):
            out[PREFIX + key] = float(value)
    return out


class ScalarLog:
    """One event file of `folder`, started afresh from `records` (metrics.jsonl as kept)."""

    def __init__(self, folder: Path, records: list[dict[str, Any]]) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob(_EVENT_FILES):
            if old.is_file() and not old.is_symlink():
                old.unlink()
        self._writer = EventFileWriter(str(folder))
        for record in records:
            self.add(record)

    def add(self, record: dict[str, Any]) -> None:
        """The record's scalars at step = its iteration."""
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        step = record.get("iteration")
        if not isinstance(step, int):
            return
        values = [Summary.Value(tag=tag, simple_value=value)
                  for tag, value in scalars(record).items()]
        self._writer.add_event(Event(wall_time=time.time(), step=step,
                                     summary=Summary(value=values)))

    def close(self) -> None:
        """Flush to disk and stop the writer's thread."""
        self._writer.close()


def open_log(run_dir: Path, records: list[dict[str, Any]]) -> ScalarLog | None:
    """The run's TensorBoard log rebuilt from `records`, or None when it is not written."""
    return ScalarLog(run_dir / FOLDER, records) if enabled() else None
