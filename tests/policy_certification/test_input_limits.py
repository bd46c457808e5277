"""Inputs are checked before they are used: a path argument of the wrong type is one line, and
sizes are checked against what this process may hold before it holds them: a huge N is
refused before any rollout or folder, and a small .npz that inflates to gigabytes is refused
from its headers, before it is decompressed."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy_format

import user_policies
from pacplan.errors import PacplanError
from pacplan.io import memory
from pacplan.policy_certification import certify_policy

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""


def test_a_matrix_larger_than_memory_is_refused_before_anything(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "available_bytes", lambda: 50 * 2**20)
    with pytest.raises(PacplanError) as info:
        certify_policy("CartPole-v1", [user_policies.balance], n=10**6, return_bounds=(0, 500),
                       out=tmp_path / "out")
    text = str(info.value)
    assert "\n" not in text and "1,000,000 seeds × 1 policies needs" in text, text
    assert "about 50.0 MiB" in text and "fewer seeds (n, test_n)" in text, text
    assert not (tmp_path / "out").exists()


def test_the_address_space_limit_counts(tmp_path: Path) -> None:
    """Under `ulimit -v` the limit, not the machine's free memory, is what is available."""
    code = ("import resource; from pacplan.io.memory import available_bytes; "
            "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, resource.RLIM_INFINITY)); "
            "print(available_bytes())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert 0 < int(out) < 3 * 2**30


def _inflating_npz(path: Path, rows: int) -> None:
    """mean.npy claims `rows` float64 zeros (they compress ~1000:1), var, clip_obs, epsilon."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for key, shape in (("mean", (rows,)), ("var", (4,)), ("clip_obs", ()),
                           ("epsilon", ())):
            header = io.BytesIO()
            npy_format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                       "shape": shape})
            with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
                member.write(header.getvalue())
                member.write(bytes(8 * int(np.prod(shape))))


def test_an_inflating_npz_is_refused_from_its_headers(tmp_path: Path) -> None:
    path = tmp_path / "stats.npz"
    _inflating_npz(path, 5_000_000)  # 40 MB inflated from ~40 kB
    assert path.stat().st_size < 200_000
    with pytest.raises(PacplanError) as info:
        certify_policy("CartPole-v1", [user_policies.balance], n=10, return_bounds=(0, 500),
                       obs_normalization=path, out=tmp_path / "out")
    text = str(info.value)
    assert "\n" not in text and "array 'mean' is far larger than it can be" in text, text
    assert "shape (5000000,)" in text and "refused before reading it" in text, text


@pytest.mark.parametrize("arg", ["out", "obs_normalization"])
def test_a_path_argument_of_the_wrong_type_is_one_line(tmp_path: Path, arg: str) -> None:
    """`certify_policy(out=123)` ended in a TypeError traceback."""
    with pytest.raises(PacplanError) as info:
        certify_policy("CartPole-v1", [user_policies.balance], n=5, return_bounds=(0, 500),
                       **{"out": tmp_path / "o", arg: 123})
    assert str(info.value) == f"{arg} must be a path (a str or os.PathLike), got int"


def _stats(path: Path, **change: object) -> Path:
    arrays: dict[str, object] = {"mean": np.zeros(4), "var": np.ones(4), "clip_obs": 10.0,
                                 "epsilon": 1e-8}
    np.savez(path, **{**arrays, **change})
    return path


@pytest.mark.parametrize(("change", "expected"), [
    ({"mean": np.array(["a"] * 4)}, "mean must be real floating-point numbers, got an array of "
                                    "<U1"),
    ({"mean": np.array([np.datetime64("2020-01-01")] * 4)}, "got an array of datetime64[D]"),
    ({"mean": np.zeros(4) + 1j}, "mean must be real floating-point numbers, got an array of "
                                 "complex128"),
    ({"var": np.ones(4, dtype=bool)}, "var must be real floating-point numbers"),
    ({"var": np.zeros(4)}, "mean and var must be finite (var > 0)"),
    ({"mean": np.full(4, np.nan)}, "mean and var must be finite (var > 0)"),
    ({"mean": np.zeros(3)}, "must have the observations' shape (4,)"),
    ({"clip_obs": np.array(True)}, "clip_obs must be one real number, got bool"),
])
def test_normalization_statistics_must_be_real_finite_arrays(
        tmp_path: Path, change: dict[str, object], expected: str) -> None:
    """A string, datetime or complex mean ended in a traceback or a NumPy warning."""
    with pytest.raises(PacplanError) as info:
        certify_policy("CartPole-v1", [user_policies.balance], n=5, return_bounds=(0, 500),
                       obs_normalization=_stats(tmp_path / "s.npz", **change),
                       out=tmp_path / "out")
    assert "\n" not in str(info.value) and expected in str(info.value), str(info.value)
    assert not (tmp_path / "out").exists()


def test_a_npy_is_not_taken_for_the_statistics(tmp_path: Path) -> None:
    np.save(tmp_path / "stats.npy", np.zeros(4))
    with pytest.raises(PacplanError, match=r"stats\.npy is one \.npy array; the statistics "
                                           r"are an \.npz of mean, var, clip_obs, epsilon"):
        certify_policy("CartPole-v1", [user_policies.balance], n=5, return_bounds=(0, 500),
                       obs_normalization=tmp_path / "stats.npy", out=tmp_path / "out")


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"train_seeds": 5}, "train_seeds must be two integers [start, stop), got 5"),
    ({"log": 5}, "log must be a function of one message (or None), got int"),
    ({"names": 5}, "names must be a pacplan.policy_certification.names.Names, got int"),
])
def test_remaining_type_errors_are_one_line(tmp_path: Path, kwargs: dict, expected: str
                                            ) -> None:
    """A TypeError or AttributeError traceback each, before."""
    with pytest.raises(PacplanError) as info:
        certify_policy("CartPole-v1", [user_policies.balance], n=5, return_bounds=(0, 500),
                       out=tmp_path / "out", **kwargs)
    assert str(info.value) == expected
