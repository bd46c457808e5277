"""Resume trusts nothing unchecked: chunks, the manifest, timings and the frozen config.

A killed run is simulated deterministically by an executor that stops after a few chunks of the
certification matrix (the real SIGKILL is tests/pipeline/test_faults.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.execution.chunks import ChunkStore
from pacplan.pipeline.execution.executors import SerialExecutor
from pacplan.pipeline.pipeline import run
from pacplan.pipeline.provenance import verify_certificate as verify

BASE = {
    "name": "toy-integrity",
    "world": {"name": "toy", "options": {"dim": 6, "shift": 0.3}},
    "seeds": {"prior": [0, 300], "cert": [10_000, 10_240], "test": [20_000, 20_200]},
    "es": {"iterations": 4, "envs_per_iter": 6, "pairs_per_env": 3, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 40},
    "policies": {"m": 12, "seed": 3},
    "certificate": {"n": [240], "delta": 0.05},
    "report": {"trajectories": 0},
}
CHUNKS = 6 * 3  # the certification matrix: 240 seeds / 40 × 12 policies / 4


class Killed(Exception):
    """Stands in for SIGKILL: raised after `limit` chunks of a matrix are written."""


class StopsAfter(SerialExecutor):
    """Serial executor whose cost matrices stop after `limit` finished chunks."""

    def __init__(self, limit: int) -> None:
        super().__init__(chunk_policies=4, chunk_seeds=40)
        self.limit = limit

    def iter_chunks(self, spec, thetas, seeds, skip=()):
        for i, chunk in enumerate(super().iter_chunks(spec, thetas, seeds, skip)):
            if i == self.limit:
                raise Killed
            yield chunk


def _cfg(**changes):
    return parse_config(yaml.safe_load(yaml.safe_dump(BASE)) | changes)


def _killed_run(run_dir: Path, limit: int = 5) -> Path:
    """A run directory left by a run killed inside the certification matrix."""
    with pytest.raises(Killed):
        run(_cfg(), run_dir, progress=False, executor=StopsAfter(limit))
    return run_dir / "costs" / "cert.chunks"


def _finished_chunks(chunks: Path) -> list[Path]:
    return sorted(chunks.glob("s*_t*.npy"))


@pytest.fixture(scope="module")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted run: what every resumed run must reproduce."""
    out = tmp_path_factory.mktemp("clean")
    run(_cfg(), out, progress=False)
    return out


def _same_results(a: Path, b: Path) -> None:
    for name in ("policies.npy", "costs/cert.npy", "costs/test.npy"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name
    assert verify(a / "certificate.json").certified == verify(b / "certificate.json").certified


# -- chunks ---------------------------------------------------------------------------------------


def test_a_zeroed_chunk_is_named_not_used(tmp_path: Path, clean: Path) -> None:
    """The issue's attack: zeroing a finished chunk lowered the certified bound, verify passed."""
    chunks = _killed_run(tmp_path)
    victim = _finished_chunks(chunks)[1]
    np.save(victim, np.zeros_like(np.load(victim)))
    with pytest.raises(PacplanError, match=rf"{victim.name}.*(changed|corrupted).*delete it"):
        run(_cfg(), tmp_path, progress=False)
    victim.unlink()  # the advice: delete it to recompute
    run(_cfg(), tmp_path, progress=False)
    _same_results(tmp_path, clean)


def test_the_error_is_one_line(tmp_path: Path) -> None:
    chunks = _killed_run(tmp_path)
    victim = _finished_chunks(chunks)[0]
    victim.write_bytes(victim.read_bytes()[:-8] + bytes(8))
    with pytest.raises(PacplanError) as err:
        run(_cfg(), tmp_path, progress=False)
    assert "\n" not in str(err.value) and str(victim) in str(err.value)


def test_stray_files_in_a_chunk_folder_are_ignored_and_recomputed(tmp_path: Path,
                                                                  clean: Path) -> None:
    """Files the ledger does not know are never read: a chunk cut off by a kill before its
    ledger line, a chunk of another shape, junk. The matrix is the clean run's."""
    chunks = _killed_run(tmp_path)
    done = len(_finished_chunks(chunks))
    assert done == 5, "finished: (0, 0), (0, 4), (0, 8), (40, 0), (40, 4)"
    np.save(chunks / f"s{200:09d}_t{8:06d}.npy", np.full((40, 4), 0.5))  # unlisted: a stray
    np.save(chunks / f"s{160:09d}_t{0:06d}.npy", np.zeros((7, 3)))  # a stray of the wrong shape
    (chunks / "sabc_tdef.npy").write_text("not an array")
    (chunks / "notes.txt").write_text("hello")
    ex = StopsAfter(limit=10**9)
    computed = []
    real = ex.iter_chunks

    def counting(*a, **k):
        for chunk in real(*a, **k):
            computed.append(chunk.key)
            yield chunk

    ex.iter_chunks = counting  # type: ignore[method-assign]
    run(_cfg(), tmp_path, progress=False, executor=ex)
    cert_computed = computed[: CHUNKS - done]
    assert (200, 8) in cert_computed and (160, 0) in cert_computed
    _same_results(tmp_path, clean)
    assert not chunks.exists(), "the chunk folder goes once the matrix is assembled"


def test_a_chunk_saved_with_the_wrong_shape_is_recomputed(tmp_path: Path, clean: Path) -> None:
    """A ledger entry that does not fit the chunk grid (say, the chunk sizes changed) is redone,
    never placed: today this said "incomplete after all chunks ran" on every rerun."""
    chunks = _killed_run(tmp_path)
    inputs = json.loads((chunks / "inputs.json").read_text())["inputs"]
    ChunkStore(chunks, inputs).save((0, 0), np.full((40, 3), 0.5))
    run(_cfg(), tmp_path, progress=False)
    _same_results(tmp_path, clean)


def test_a_chunk_whose_content_disagrees_with_its_ledger_is_named(tmp_path: Path) -> None:
    """A ledger forged to match a wrong-shaped chunk: its shape is checked when read."""
    chunks = _killed_run(tmp_path)
    inputs = json.loads((chunks / "inputs.json").read_text())["inputs"]
    store = ChunkStore(chunks, inputs)
    store.save((0, 0), np.full((40, 3), 0.5))
    ledger = chunks / ChunkStore.LEDGER
    lines = ledger.read_text().splitlines()
    last = json.loads(lines[-1])
    lines[-1] = json.dumps(last | {"shape": [40, 4]})
    ledger.write_text("\n".join(lines) + "\n")
    with pytest.raises(PacplanError, match=r"s000000000_t000000\.npy.*shape.*delete it"):
        run(_cfg(), tmp_path, progress=False)


def test_a_torn_ledger_line_loses_only_that_chunk(tmp_path: Path, clean: Path) -> None:
    """A kill while the ledger line is appended: that chunk is recomputed, the rest is kept."""
    chunks = _killed_run(tmp_path)
    ledger = chunks / ChunkStore.LEDGER
    text = ledger.read_text()
    ledger.write_text(text[: len(text) - 20])
    run(_cfg(), tmp_path, progress=False)
    _same_results(tmp_path, clean)


# -- manifest, timings, frozen config ------------------------------------------------------------


@pytest.mark.parametrize("content", ["[]", '{"policies.npy": "abc"}', '{"policies.npy": {}}',
                                     '"text"', "{not json", b"\xff\xfe"])
def test_a_malformed_manifest_is_one_named_error(tmp_path: Path, content: str | bytes) -> None:
    run(_cfg(), tmp_path, progress=False)
    path = tmp_path / "manifest.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(PacplanError, match=r"manifest\.json") as err:
        run(_cfg(), tmp_path, progress=False)
    assert "\n" not in str(err.value)


def test_a_truncated_timings_file_is_named_and_replaced(tmp_path: Path) -> None:
    """One bad timings.json used to crash every later run after all its work."""
    run(_cfg(), tmp_path, progress=False)
    path = tmp_path / "timings.json"
    path.write_text(path.read_text()[:25])
    said: list[str] = []
    run(_cfg(), tmp_path, progress=False, log=said.append)
    history = json.loads(path.read_text())
    assert isinstance(history, list) and len(history) == 1
    assert any("timings.json" in line for line in said)


@pytest.mark.parametrize("damage", ["truncate", "list", "binary", "empty"])
def test_a_damaged_frozen_config_is_one_named_error(tmp_path: Path, damage: str) -> None:
    run(_cfg(), tmp_path, progress=False)
    path = tmp_path / "config.yaml"
    text = path.read_text()
    path.write_bytes({"truncate": text[: len(text) // 2].encode(), "list": b"- a\n- b\n",
                      "binary": b"\xff\xfe\x00", "empty": b""}[damage])
    with pytest.raises(PacplanError, match=r"config\.yaml") as err:
        run(_cfg(), tmp_path, progress=False)
    assert "\n" not in str(err.value)
