"""`pacplan.io.weights.load_theta`: a user's policy file is read safely or refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

from pacplan.errors import PacplanError
from pacplan.io.weights import load_theta


def test_npy_and_safetensors_load(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    theta = np.arange(4, dtype=np.float32)
    np.save(tmp_path / "t.npy", np.stack([theta, theta + 1]))
    np.testing.assert_array_equal(load_theta(tmp_path / "t.npy", 4), theta)
    save_file({"mu": theta, "logvar": theta}, str(tmp_path / "p.safetensors"))
    np.testing.assert_array_equal(load_theta(tmp_path / "p.safetensors", 4), theta)


def _write(path: Path, kind: str) -> Path:
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("1 2 3 4\n")
    elif kind == "huge":
        with open(path, "wb") as fh:
            npy_format.write_array_header_1_0(
                fh, {"descr": "<f4", "fortran_order": False, "shape": (10**11, 10)})
            fh.write(b"\0" * 16)
    elif kind == "object":
        np.save(path, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    return path


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("empty", r"not a \.npy file \(it is empty\)"),
        ("text", r"not a \.npy file"),
        ("huge", r"claims shape \(100000000000, 10\)"),
        ("object", "pickled data is refused"),
    ],
)
def test_bad_npy_is_one_named_error(tmp_path: Path, kind: str, message: str) -> None:
    path = _write(tmp_path / f"{kind}.npy", kind)
    with pytest.raises(PacplanError, match=message) as info:
        load_theta(path, 4)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert kind == "object" or "pickle" not in str(info.value)
