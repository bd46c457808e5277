"""Check-then-read races: a file swapped between being hashed and being read must never be used
unhashed. `verify` and `certify-matrix` hash exactly the bytes they parse (issue 25, class 1)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from helpers import swap_on_second_open
from pacplan.errors import PacplanError
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.pacbayes.verify import verify
from verify_helpers import read, small_certificate, write


def test_verify_never_reads_a_matrix_swapped_after_hashing(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    genuine = small_certificate(tmp_path / "genuine")
    cert_npy = tmp_path / "genuine" / "cert.npy"
    # a forged matrix (every cost lower) and the certificate it would give, claiming the
    # genuine matrix's sha256
    low = np.load(cert_npy) * 0.2
    np.save(tmp_path / "low.npy", low)
    forged = build_certificate(load_cost_matrix(tmp_path / "low.npy"), 0.05,
                               test=load_cost_matrix(tmp_path / "genuine" / "test.npy"))
    forged_path = forged.save(tmp_path / "genuine" / "forged.json")
    record = read(forged_path)
    record["cert_matrix"]["sha256"] = read(genuine)["cert_matrix"]["sha256"]
    record["cert_matrix"]["path"] = "cert.npy"
    write(forged_path, record, rehash=True)
    swap_on_second_open(monkeypatch, cert_npy, (tmp_path / "low.npy").read_bytes())
    with pytest.raises(PacplanError, match=r"disagree|recomputes to|not optimal"):
        verify(forged_path)


def test_certify_matrix_records_the_hash_of_the_bytes_it_used(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    np.save(tmp_path / "a.npy", np.full((10, 3), 0.5))
    np.save(tmp_path / "b.npy", np.full((10, 3), 0.1))
    swap_on_second_open(monkeypatch, tmp_path / "a.npy", (tmp_path / "b.npy").read_bytes())
    m = load_cost_matrix(tmp_path / "a.npy")
    monkeypatch.undo()
    # the values are the first bytes' (0.5), and the recorded sha256 is of those bytes, not of
    # the file swapped in after
    assert float(m.values[0, 0]) == 0.5
    np.save(tmp_path / "c.npy", np.full((10, 3), 0.5))
    assert m.sha256 == hashlib.sha256((tmp_path / "c.npy").read_bytes()).hexdigest()
