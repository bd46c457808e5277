"""Safe file I/O: atomic writes leave nothing behind on failure; `.npy` reading checks before
it allocates and never unpickles."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from pacplan.errors import PacplanError
from pacplan.io.files import atomic_save_npy, atomic_write_bytes, load_npy


def _disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make every fsync fail the way a full disk does (an OSError without a file name)."""

    def no_space(_fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", no_space)


def test_failed_write_leaves_no_temporary_file_and_keeps_the_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "policies.npy"
    target.write_bytes(b"old")
    _disk_full(monkeypatch)
    with pytest.raises(OSError) as info:
        atomic_write_bytes(target, b"new content")
    assert info.value.errno == errno.ENOSPC
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policies.npy"]  # no .tmp left
    assert target.read_bytes() == b"old"


def test_failed_write_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk raises an OSError with no file name; the error names the target."""
    _disk_full(monkeypatch)
    with pytest.raises(OSError) as info:
        atomic_write_bytes(tmp_path / "a.json", b"{}")
    assert info.value.filename == str(tmp_path / "a.json")


def test_round_trip_of_plain_arrays(tmp_path: Path) -> None:
    for arr in (np.arange(12.0).reshape(3, 4), np.arange(5, dtype=np.int64),
                np.asfortranarray(np.ones((2, 3), np.float32)), np.zeros((0, 3)),
                np.float64(2.5)):
        atomic_save_npy(tmp_path / "a.npy", arr)
        back = load_npy(tmp_path / "a.npy")
        assert back.dtype == np.asarray(arr).dtype and np.array_equal(back, arr)


def _header_only(path: Path, shape: tuple[int, ...], extra: bytes = b"") -> Path:
    """A .npy whose header claims `shape` of float64, followed by `extra` bytes of data."""
    with open(path, "wb") as fh:
        npy_format.write_array_header_1_0(
            fh, {"descr": "<f8", "fortran_order": False, "shape": shape})
        fh.write(extra)
    return path


def test_empty_file_is_not_a_npy(tmp_path: Path) -> None:
    (tmp_path / "e.npy").write_bytes(b"")
    with pytest.raises(PacplanError, match=r"e\.npy: not a \.npy file \(it is empty\)"):
        load_npy(tmp_path / "e.npy")


def test_huge_header_is_refused_before_allocating(tmp_path: Path) -> None:
    path = _header_only(tmp_path / "huge.npy", (10**11, 10), extra=b"\0" * 64)
    with pytest.raises(PacplanError) as info:
        load_npy(path)
    msg = str(info.value)
    assert "huge.npy" in msg and "(100000000000, 10)" in msg and "64 bytes" in msg


def test_truncated_and_padded_data_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match="truncated"):
        load_npy(_header_only(tmp_path / "short.npy", (4, 4), extra=b"\0" * 100))
    with pytest.raises(PacplanError, match="more bytes"):
        load_npy(_header_only(tmp_path / "long.npy", (2,), extra=b"\0" * 24))


def test_text_file_is_not_a_npy_and_not_called_pickled(tmp_path: Path) -> None:
    (tmp_path / "t.npy").write_text("0.1, 0.2\n0.3, 0.4\n")
    with pytest.raises(PacplanError) as info:
        load_npy(tmp_path / "t.npy")
    assert "not a .npy file" in str(info.value) and "pickle" not in str(info.value)


def test_npz_archive_is_named(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.zeros(3))
    with pytest.raises(PacplanError, match="archive"):
        load_npy(tmp_path / "a.npz")


def test_object_arrays_are_refused_as_pickled(tmp_path: Path) -> None:
    path = tmp_path / "obj.npy"
    np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(PacplanError, match="pickled data is refused"):
        load_npy(path)


def test_damaged_header_is_named(tmp_path: Path) -> None:
    path = tmp_path / "bad.npy"
    path.write_bytes(b"\x93NUMPY\x01\x00" + b"\x10\x00" + b"{'descr': 1}    ")
    with pytest.raises(PacplanError, match=r"bad\.npy: damaged \.npy header"):
        load_npy(path)


def test_missing_file_and_label(tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match="certification costs: no such file"):
        load_npy(tmp_path / "none.npy", name="certification costs")
