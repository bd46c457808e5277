"""A resumed run says where it picks up: the ES iteration it continues from and how many cost
chunks it keeps (counted here from the chunk grid, independently of the message's code)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import SMALL_TOY_RUN
from pacplan.config import parse_config
from pacplan.run.executors import Chunk, SerialExecutor
from pacplan.run.pipeline import run
from pacplan.run.training import train_prior


class _StopAfter(SerialExecutor):
    """A serial executor interrupted (as by Ctrl-C) after `chunks` cert-cost chunks."""

    def __init__(self, chunks: int, **kw: int) -> None:
        super().__init__(**kw)
        self.left = chunks

    def iter_chunks(self, *args: Any, **kwargs: Any) -> Iterator[Chunk]:
        for chunk in super().iter_chunks(*args, **kwargs):
            if self.left == 0:
                raise KeyboardInterrupt
            self.left -= 1
            yield chunk


def _config() -> Any:
    data = {**SMALL_TOY_RUN, "executor": {"kind": "serial", "chunk_policies": 4,
                                          "chunk_seeds": 20}}
    return parse_config(data)


def test_resume_says_the_es_iteration_it_continues_from(tmp_path: Path) -> None:
    cfg = _config()
    train_prior(cfg, tmp_path / "run", progress=False, stop_after=2)
    said: list[str] = []
    run(cfg, tmp_path / "run", progress=False, log=said.append)
    assert f"resumed: ES at iteration 2 of {cfg.es.iterations}" in said


def test_resume_says_how_many_cost_chunks_it_keeps(tmp_path: Path) -> None:
    cfg = _config()
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        run(cfg, out, progress=False, executor=_StopAfter(3, chunk_policies=4, chunk_seeds=20))
    n_cert = max(cfg.certificate.n)
    total = math.ceil(n_cert / 20) * math.ceil(cfg.policies.m / 4)
    said: list[str] = []
    run(cfg, out, progress=False, log=said.append)
    assert f"resumed: cert costs, 3 of {total} chunks kept" in said
    assert not any(s.startswith("resumed: ES") for s in said)  # the prior was finished: kept
