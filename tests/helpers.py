"""Helpers shared by test files (tests/ is on sys.path through its conftest)."""

from __future__ import annotations

import builtins
import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from pacplan.cli import main
from pacplan.errors import PacplanError
from pacplan.io.files import sha256_file
from pacplan.pipeline.execution.executors import Chunk, SerialExecutor

SMALL_TOY_RUN: dict[str, Any] = {
    "name": "toy-small",
    "world": {"name": "toy", "options": {"dim": 4, "shift": 0.3}},
    "seeds": {"prior": [0, 100], "cert": [10_000, 10_060], "test": [20_000, 20_050]},
    "es": {"iterations": 3, "envs_per_iter": 4, "pairs_per_env": 2, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 8, "chunk_seeds": 30},
    "policies": {"m": 6, "seed": 3},
    "certificate": {"n": [30, 60], "delta": 0.05},
    "report": {"trajectories": 0},
}
"""A toy run of a second or two: 3 ES iterations, 6 policies, certificates for N = 30, 60."""


def require_whole(run: Path) -> None:
    """Skip a test of a shipped run that lacks the paper's Minitaur prior (pacplan fetches it:
    `conftest.shipped_results_whole` puts it back when the paper's files are here); under CI,
    where they must be, fail instead."""
    if (run / "prior.safetensors").exists() or not (run / "manifest.json").is_file():
        return
    message = (f"{run.name} needs the paper's Minitaur prior: pacplan data paper && pacplan "
               f"data minitaur-prior {run / 'prior.safetensors'}")
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run `pacplan ARGS` in-process through the console entry point: (exit code, out, err)."""
    old = sys.argv
    sys.argv = ["pacplan", *args]
    try:
        main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out, err = capsys.readouterr()
    return code, out, err


def fails_in_one_line(check: Callable[[Path], Any], path: Path, *words: str) -> str:
    """`check(path)` raises a one-line PacplanError containing every word; returns it with the
    file's folder shown as <dir>."""
    with pytest.raises(PacplanError) as info:
        check(path)
    message = str(info.value).replace(str(path.parent), "<dir>")
    assert "\n" not in message
    for word in words:
        assert word in message, message
    return message


class CountingExecutor(SerialExecutor):
    """A serial executor that counts what it computes: `computed` tasks (chunks) and `cells`
    (policy × environment costs)."""

    def __init__(self, **kw: int) -> None:
        super().__init__(**kw)
        self.computed = 0
        self.cells = 0

    def _run(self, spec: Any, tasks: Any) -> Iterator[Any]:
        for i, result in super()._run(spec, tasks):
            self.computed += 1
            self.cells += sum(int(b.size) for b in result.blocks)
            yield i, result


class StopAfter(SerialExecutor):
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


def load_script(path: Path) -> ModuleType:
    """A script or benchmark file (not a package module) imported under its file name, its
    folder on sys.path as `python path` puts it (so it finds the scripts beside it)."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses in it look their module up
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec.loader.exec_module(module)
    return module


def run_script(path: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """A script or benchmark run as a user runs it (this Python), its output captured."""
    return subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=timeout)


def assert_refused(res: subprocess.CompletedProcess[str], names: str) -> None:
    """Bad input: exit 2, nothing on stdout, one `error: ` line naming `names` (PyBullet's
    build-time banner aside)."""
    assert res.returncode == 2, res.stderr
    assert res.stdout == ""
    lines = [x for x in res.stderr.strip().splitlines() if not x.startswith("pybullet build")]
    assert len(lines) == 1 and lines[0].startswith("error: ") and names in lines[0], lines


def binary_kl(q: float, c: float) -> float:
    """kl(Bernoulli(q) ‖ Bernoulli(c)), written out (an oracle independent of pacplan's)."""
    out = 0.0
    if q > 0:
        out += q * math.log(q / c)
    if q < 1:
        out += (1 - q) * math.log((1 - q) / (1 - c))
    return out


def klinv_oracle(emp: float, kl_div: float, n: int, delta: float) -> float:
    """sup{c ∈ [Ĉ, 1] : kl(Ĉ‖c) ≤ (KL + ln(2√N/δ)) / N}, by scipy's root finder."""
    from scipy.optimize import brentq

    budget = (kl_div + math.log(2 * math.sqrt(n) / delta)) / n
    if binary_kl(emp, 1 - 1e-15) <= budget:
        return 1.0
    return brentq(lambda c: binary_kl(emp, c) - budget, emp + 1e-300 if emp < 1 else emp,
                  1 - 1e-15, xtol=1e-14, rtol=1e-14)


def run_policy_family(run: Path) -> dict[str, Any]:
    """The world options of a finished run that choose its policy family (the world's
    `prior_options`: the UAV's conv or paper net), read from its frozen config.yaml."""
    from pacplan.config import load_config
    from pacplan.worlds.base import prior_options

    cfg = load_config(run / "config.yaml")
    keys = prior_options(cfg.world.name)
    return {k: v for k, v in cfg.world.options.items() if k in keys}


def swap_on_second_open(monkeypatch: pytest.MonkeyPatch, target: Path, forged: bytes) -> None:
    """Replace `target`'s bytes with `forged` just before it is opened a second time: what a
    reader that hashes a path and then opens it again would use unhashed."""
    opens = {"n": 0}
    real_open, real_os_open = builtins.open, os.open

    def count(path: object) -> None:
        if isinstance(path, (str, os.PathLike)) and Path(path).resolve() == target.resolve():
            opens["n"] += 1
            if opens["n"] == 2:
                target.write_bytes(forged)  # not through the patched open: write_bytes

    def fake_open(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        count(file)
        return real_open(file, *args, **kwargs)

    def fake_os_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        count(path)
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)


def onnx_linear(path: Path, n_in: int, n_out: int, scale: float = 1.0) -> None:
    """A tiny .onnx policy: scores = obs · Wᵀ (the convention's float32 batch in), W drawn
    from a fixed seed."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    w = (np.random.default_rng(3).normal(size=(n_out, n_in)) * scale).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["obs", "w"], ["out"], transB=1)], "linear",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", n_in])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", n_out])],
        initializer=[numpy_helper.from_array(w, "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())


def rehash_planner(planner: Path) -> None:
    """Re-hash every file of an exported planner into its manifest.json, as a careless or
    hostile editor would (so only the checks beyond the hashes can catch the edit)."""
    manifest = json.loads((planner / "manifest.json").read_text())
    manifest["files"] = {f: sha256_file(planner / f) for f in manifest["files"]}
    (planner / "manifest.json").write_text(json.dumps(manifest))
