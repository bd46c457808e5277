"""Growing N on a certify-policy folder wastes no rollout (issue 51): the larger N's rows are
the smaller N's certification and test rows, byte for byte, plus new ones; the result equals a
fresh folder's; every certificate (each N, T and δ) is kept beside the others and verifies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pacplan.api import verify
from pacplan.policy_certification import certify as certify_module
from pacplan.policy_certification import certify_policy

FIRST = 1_000_000
ARGS = {"cost": "terminated", "horizon": 60}
POLICIES = ["user_policies:lean", "user_policies:balance"]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The seed ranges rolled out, as (first seed, stop)."""
    real, seen = certify_module.cost_rows, []

    def counting(world: Any, env: Any, policies: Any, seeds: range, *args: Any) -> np.ndarray:
        seen.append((seeds.start, seeds.stop))
        return real(world, env, policies, seeds, *args)

    monkeypatch.setattr(certify_module, "cost_rows", counting)
    return seen


def test_a_larger_n_reuses_every_row_and_keeps_every_certificate(
        tmp_path: Path, calls: list[tuple[int, int]]) -> None:
    out = tmp_path / "grow"
    small = certify_policy("CartPole-v1", POLICIES, n=20, test_n=10, out=out, **ARGS)
    assert calls == [(FIRST, FIRST + 10), (FIRST + 10, FIRST + 20),
                     (FIRST + 20, FIRST + 30)]
    calls.clear()
    big = certify_policy("CartPole-v1", POLICIES, n=30, test_n=10, out=out, **ARGS)
    assert calls == [(FIRST + 30, FIRST + 40)]  # only the new test seeds
    costs = out / "costs"
    first, grown = np.load(costs / "cert.npy"), np.load(costs / "cert-N30.npy")
    assert np.array_equal(grown[:20], first)  # the first rows, byte for byte
    assert np.array_equal(grown[20:], np.load(costs / "test.npy"))  # old test seeds, reused
    calls.clear()
    fresh = certify_policy("CartPole-v1", POLICIES, n=30, test_n=10, out=tmp_path / "fresh",
                           **ARGS)
    assert np.array_equal(np.load(tmp_path / "fresh" / "costs" / "cert.npy"), grown)
    assert np.array_equal(np.load(tmp_path / "fresh" / "costs" / "test.npy"),
                          np.load(costs / "test-N30-T10.npy"))
    assert big.certificate.certified == fresh.certificate.certified
    kept = sorted(p.name for p in (out / "certificates").iterdir())
    assert kept == ["N20-T10-delta0.01.json", "N30-T10-delta0.01.json"]
    assert verify(out / "certificates" / "N20-T10-delta0.01.json").certified == \
        small.certificate.certified
    assert verify(out / "certificate.json").n == 30
    calls.clear()
    wider = certify_policy("CartPole-v1", POLICIES, n=30, test_n=10, delta=0.05, out=out,
                           **ARGS)
    assert calls == [] and wider.certificate.certified < big.certificate.certified
    assert (out / "certificates" / "N30-T10-delta0.05.json").is_file()
    for path in (out / "certificates").iterdir():
        verify(path)  # each one still checks against the files it names
    smaller = certify_policy("CartPole-v1", POLICIES, n=10, out=out, **ARGS)
    assert calls == [] and smaller.certificate.n == 10  # all rows were there already
    assert np.array_equal(np.load(smaller.certificate.cert_matrix.path), first[:10])


def test_a_grow_killed_midway_resumes_from_its_chunks(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "k"
    certify_policy("CartPole-v1", POLICIES, n=10, out=out, **ARGS)
    real, seen = certify_module.cost_rows, []

    def dies_on_the_second(world: Any, env: Any, policies: Any, seeds: range,
                           *args: Any) -> np.ndarray:
        if len(seen) == 1:
            raise KeyboardInterrupt
        seen.append((seeds.start, seeds.stop))
        return real(world, env, policies, seeds, *args)

    monkeypatch.setattr(certify_module, "cost_rows", dies_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        certify_policy("CartPole-v1", POLICIES, n=35, out=out, **ARGS)
    assert seen == [(FIRST + 10, FIRST + 20)]
    monkeypatch.setattr(certify_module, "cost_rows", real)
    grown = certify_policy("CartPole-v1", POLICIES, n=35, out=out, **ARGS)
    fresh = certify_policy("CartPole-v1", POLICIES, n=35, out=tmp_path / "f", **ARGS)
    assert np.array_equal(np.load(grown.certificate.cert_matrix.path),
                          np.load(fresh.certificate.cert_matrix.path))
    assert not (out / "costs" / "rows.chunks").exists()
    stamp = json.loads((out / "certify-policy.json").read_text())["inputs"]
    assert stamp["seeds"] == {"first": FIRST, "train": None}


def test_rows_edited_and_rehashed_in_the_ledger_are_refused(
        tmp_path: Path, calls: list[tuple[int, int]]) -> None:
    """A forged matrix listed with its new sha256 was reused when N grew; the certificate that
    used the matrix recorded its sha256 under its content hash, and the rows must match it."""
    from pacplan.errors import PacplanError
    from pacplan.io.files import sha256_bytes

    out = tmp_path / "forged"
    certify_policy("CartPole-v1", POLICIES, n=20, out=out, **ARGS)
    matrix = out / "costs" / "cert.npy"
    np.save(matrix, np.zeros((20, 2)))
    ledger = out / "costs" / "ledger.jsonl"
    lines = [json.loads(line) for line in ledger.read_text().splitlines()]
    for entry in lines:
        if entry["file"] == "cert.npy":
            entry["sha256"] = sha256_bytes(matrix.read_bytes())
    ledger.write_text("".join(json.dumps(e) + "\n" for e in lines))
    calls.clear()
    with pytest.raises(PacplanError) as info:
        certify_policy("CartPole-v1", POLICIES, n=30, out=out, **ARGS)
    text = str(info.value)
    assert "cert.npy: costs/ledger.jsonl lists sha256" in text and "costs were edited" in text
    assert calls == []  # refused before any rollout


def test_a_matrix_no_certificate_used_is_not_a_source(
        tmp_path: Path, calls: list[tuple[int, int]]) -> None:
    """Rows are reused only from matrices a certificate vouches for: without certificates,
    the growth rolls every row out again (and gets the same costs)."""
    import shutil

    out = tmp_path / "unvouched"
    first = certify_policy("CartPole-v1", POLICIES, n=20, out=out, **ARGS)
    rows = np.load(first.certificate.cert_matrix.path)
    (out / "certificate.json").unlink()
    shutil.rmtree(out / "certificates")
    calls.clear()
    grown = certify_policy("CartPole-v1", POLICIES, n=30, out=out, **ARGS)
    assert calls == [(FIRST + a, FIRST + a + 10) for a in (0, 10, 20)]
    assert np.array_equal(np.load(grown.certificate.cert_matrix.path)[:20], rows)
