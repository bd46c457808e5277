"""The paper's prior in `pacplan data paper`: a `.pt` is hash-checked before it is read, read only
with the restricted loader, refused when it holds anything but one float32 tensor of the pinned
shape, and stored as `.npy`. Served from a file:// mirror of local bytes (no network, no paper
data needed: the matrices are left out and every pin is that of the bytes made here)."""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from pacplan.errors import PacplanError
from pacplan.io import paperdata
from pacplan.io.paperdata import PaperFile, PaperTensor, fetch_paper_data

D = 13_943


def _pt(obj: Any, legacy: bool = False) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf, _use_new_zipfile_serialization=not legacy)
    return buf.getvalue()


def _npy_sha(array: np.ndarray) -> str:
    buf = io.BytesIO()
    np.save(buf, array)
    return hashlib.sha256(buf.getvalue()).hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Mirror:
    """A file:// folder serving `mu_test.pt` (and what else a test puts there), pinned."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.root, self.cache = root / "mirror", root / "cache"
        self.root.mkdir()
        self.monkeypatch = monkeypatch
        monkeypatch.setattr(paperdata, "PAPER_FILES", ())

    def serve(self, data: bytes, stored: np.ndarray, pin: str | None = None) -> PaperTensor:
        """Serve `data` as mu_test.pt, pinned to its own sha256 unless `pin` is given; the .npy
        is pinned to the hash of `stored` saved by numpy."""
        (self.root / "mu_test.pt").write_bytes(data)
        tensor = PaperTensor(PaperFile("mu_test.pt", pin or _sha(data), 1 << 20, exact_size=False),
                             PaperFile("mu_test.npy", _npy_sha(stored), 128 + stored.nbytes),
                             (D,))
        self.monkeypatch.setattr(paperdata, "PRIOR_FILES", (tensor,))
        return tensor

    def fetch(self) -> paperdata.FetchReport:
        return fetch_paper_data(self.root.as_uri() + "/", self.cache)


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Mirror:
    return Mirror(tmp_path, monkeypatch)


@pytest.fixture
def values() -> np.ndarray:
    return np.random.default_rng(7).standard_normal(D).astype(np.float32)


def _one_line(excinfo: pytest.ExceptionInfo[PacplanError]) -> str:
    message = str(excinfo.value)
    assert message and "\n" not in message
    return message


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_prior_is_read_and_stored_as_npy(mirror: Mirror, values: np.ndarray,
                                         legacy: bool) -> None:
    mirror.serve(_pt({"0": torch.from_numpy(values)}, legacy=legacy), values)
    report = mirror.fetch()
    assert report.downloaded == ("mu_test.pt",)
    assert [p.name for p in mirror.cache.iterdir()] == ["mu_test.npy"]  # no .pt, no .part
    stored = np.load(mirror.cache / "mu_test.npy", allow_pickle=False)
    assert stored.dtype == np.float32 and np.array_equal(stored, values)
    assert paperdata.is_complete(mirror.cache)
    again = mirror.fetch()
    assert again.downloaded == () and again.cached == ("mu_test.npy",)


def test_wrong_sha_is_refused_before_the_file_is_read(mirror: Mirror, values: np.ndarray,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    data = _pt({"0": torch.from_numpy(values)})
    mirror.serve(data, values, pin="0" * 64)
    loads: list[object] = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(a))
    with pytest.raises(PacplanError) as excinfo:
        mirror.fetch()
    message = _one_line(excinfo)
    assert "mu_test.pt" in message and "sha256 mismatch" in message and _sha(data) in message
    assert loads == [] and list(mirror.cache.iterdir()) == []


@pytest.mark.parametrize("tensor, words", [
    (torch.zeros(D - 1), "(13942,)"),
    (torch.zeros(1, D), "(1, 13943)"),
    (torch.zeros(D, dtype=torch.float64), "float64"),
    (torch.zeros(D, dtype=torch.int32), "int32"),
], ids=["short", "2-d", "float64", "int32"])
def test_wrong_shape_or_dtype_is_refused_naming_the_file(mirror: Mirror, values: np.ndarray,
                                                         tensor: torch.Tensor, words: str) -> None:
    mirror.serve(_pt({"0": tensor}), values)
    with pytest.raises(PacplanError) as excinfo:
        mirror.fetch()
    message = _one_line(excinfo)
    assert message.startswith("mu_test.pt:") and words in message and "(13943,)" in message
    assert list(mirror.cache.iterdir()) == []


@pytest.mark.parametrize("obj", [
    {"1": torch.zeros(D)},
    {"0": torch.zeros(D), "1": torch.zeros(D)},
    torch.zeros(D),
    [torch.zeros(D)],
], ids=["other-key", "two-keys", "bare-tensor", "list"])
def test_other_contents_are_refused_naming_the_file(mirror: Mirror, values: np.ndarray,
                                                    obj: Any) -> None:
    mirror.serve(_pt(obj), values)
    with pytest.raises(PacplanError) as excinfo:
        mirror.fetch()
    assert _one_line(excinfo).startswith("mu_test.pt: expected {'0': tensor}")
    assert list(mirror.cache.iterdir()) == []


def _touch(path: str) -> None:
    Path(path).write_text("unpickled")


@dataclasses.dataclass
class _Payload:
    """Unpickling this calls `_touch`: what a plain unpickler would run."""

    marker: str

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return _touch, (self.marker,)


def test_a_pickle_with_code_is_never_run(mirror: Mirror, values: np.ndarray,
                                         tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    mirror.serve(_pt({"0": _Payload(str(marker))}), values)
    with pytest.raises(PacplanError) as excinfo:
        mirror.fetch()
    assert "weights_only=True" in _one_line(excinfo) and "mu_test.pt" in str(excinfo.value)
    assert not marker.exists() and list(mirror.cache.iterdir()) == []


def test_non_finite_values_are_refused(mirror: Mirror, values: np.ndarray) -> None:
    bad = values.copy()
    bad[5] = np.nan
    mirror.serve(_pt({"0": torch.from_numpy(bad)}), bad)
    with pytest.raises(PacplanError, match=r"mu_test\.pt: holds values that are not finite"):
        mirror.fetch()
    assert list(mirror.cache.iterdir()) == []


def test_stored_npy_must_hash_to_its_pin(mirror: Mirror, values: np.ndarray) -> None:
    other = values + np.float32(1.0)  # the .npy pin is that of other values
    mirror.serve(_pt({"0": torch.from_numpy(values)}), other)
    with pytest.raises(PacplanError) as excinfo:
        mirror.fetch()
    assert "mu_test.npy" in _one_line(excinfo) and "not the pinned" in str(excinfo.value)
    assert list(mirror.cache.iterdir()) == []
