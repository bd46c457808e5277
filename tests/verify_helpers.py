"""Helpers for the `verify` tests: a small certificate, JSON edits, and the CLI run in-process."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from pacplan.errors import PacplanError
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.pacbayes.schema import certificate_content_sha256


def small_matrices(folder: Path, clip: bool = False) -> tuple[Path, Path]:
    """A 30 × 5 certification and a 40 × 5 test matrix with distinct column means."""
    rng = np.random.default_rng(7)
    means = np.array([0.15, 0.3, 0.45, 0.6, 0.75])
    cert = (rng.random((30, 5)) < means).astype(np.float64) * rng.uniform(0.5, 1.0, (30, 5))
    test = (rng.random((40, 5)) < means).astype(np.float64) * rng.uniform(0.5, 1.0, (40, 5))
    if clip:
        cert[0, 0], test[1, 1] = 1.25, -0.5
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "cert.npy", cert)
    np.save(folder / "test.npy", test)
    return folder / "cert.npy", folder / "test.npy"


def small_certificate(folder: Path, clip: bool = False, name: str = "cert.json") -> Path:
    """Certify the small matrices (δ = 0.05, best bound, Gibbs) and save the certificate."""
    cert_path, test_path = small_matrices(folder, clip)
    c = build_certificate(load_cost_matrix(cert_path, clip=clip), 0.05,
                          test=load_cost_matrix(test_path, clip=clip))
    return c.save(folder / name)


def read(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def write(path: Path, data: dict[str, Any], rehash: bool = False) -> Path:
    """Write `data` as the certificate; `rehash` plays the adversary who recomputes the hash."""
    if rehash:
        data = dict(data)
        data.pop("content_sha256", None)
        with contextlib.suppress(PacplanError):
            data["content_sha256"] = certificate_content_sha256(data)
    path.write_text(json.dumps(data, indent=2))
    return path


def edit(path: Path, rehash: bool = False, **changes: Any) -> Path:
    """Set top-level fields of a saved certificate (optionally re-hashing it)."""
    return write(path, {**read(path), **changes}, rehash)


def run_cli(*args: str) -> tuple[int, str, str]:
    """`pacplan ARGS` in this process: (exit code, stdout, stderr)."""
    from pacplan.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with mock.patch.object(sys, "argv", ["pacplan", *args]), \
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()
