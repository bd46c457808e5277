"""The certificate record: what a certificate states, and its file (save and load).

Saving writes plain JSON atomically, with matrix paths relative to the certificate's folder and
the content hash last; what `verify` would refuse (a non-finite number) is never written.
Loading is strict (`pacplan.pacbayes.schema`); recomputing the numbers is `verify`'s job.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacplan import __version__
from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_json
from pacplan.pacbayes.schema import (
    CertificateRecord,
    ProvenanceRecord,
    certificate_content_sha256,
    check_content_hash,
    read_json,
    validate_record,
)


@dataclass
class MatrixRef:
    """Which file a matrix came from, its hash, and the rows used."""

    path: str
    sha256: str
    rows: int
    clipped: int = 0


@dataclass
class Certificate:
    """Everything needed to state, reproduce and check one PAC-Bayes certificate."""

    mcallester: float
    quadratic: float
    klinv: float
    certified: float
    certified_by: str
    emp_cost: float
    kl: float
    n: int
    m: int
    delta: float
    bound: str
    solver: str
    p: list[float]
    clip: bool
    cert_matrix: MatrixRef
    test_cost: float | None = None
    test_ci: list[float] | None = None
    test_confidence: float | None = None
    test_n: int | None = None
    test_matrix: MatrixRef | None = None
    beta: float | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    # a screened certificate: the matrices hold these columns of the m policies, in this order,
    # and p is zero off them (None: every column, the plain certificate)
    columns: list[int] | None = None
    pacplan_version: str = __version__
    created: str = field(default_factory=lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    content_sha256: str | None = None  # set when saved or loaded; None for one never saved

    def posterior_sha256(self) -> str:
        """sha256 of the posterior p as float64 bytes: names the posterior itself, unlike
        `content_sha256`, which changes when the same certificate is computed again."""
        return hashlib.sha256(np.asarray(self.p, dtype=np.float64).tobytes()).hexdigest()

    def matrix_p(self) -> np.ndarray:
        """p on the columns its matrices hold: all m, or a screened certificate's columns."""
        p = np.asarray(self.p, dtype=np.float64)
        return p if self.columns is None else p[self.columns]

    def matrix_column(self, policy: int) -> int:
        """The column of the matrices that holds policy `policy` (one of the m)."""
        return policy if self.columns is None else self.columns.index(policy)

    def __str__(self) -> str:
        """One line a person reads: the certified cost and what it rests on."""
        test = "" if self.test_cost is None else f", test cost {self.test_cost:.4g}"
        m = f"m = {self.m}" if self.columns is None else \
            f"m = {self.m}, posterior on {len(self.columns)} screened"
        return (f"expected cost ≤ {self.certified:.4g} with probability ≥ {1 - self.delta:g} "
                f"({self.certified_by}; N = {self.n}, {m}, "
                f"empirical cost {self.emp_cost:.4g}, KL {self.kl:.4g}{test})")

    # ------------------------------------------------------------------ (de)serialization
    def to_dict(self) -> dict[str, Any]:
        """The certificate's fields as plain Python values (`beta` = ∞ as "inf")."""
        d = asdict(self)
        if self.columns is None:  # a plain certificate's file is as it always was
            del d["columns"]
        if self.beta is not None and math.isinf(self.beta):
            d["beta"] = "inf"
        return d

    def to_json(self, indent: int | None = 2) -> str:
        """The certificate's fields as JSON text, the format of a certificate file (matrix
        paths as recorded in memory, not yet relative to a file's folder)."""
        try:
            return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False,
                              allow_nan=False)
        except ValueError:
            raise PacplanError("the certificate holds a non-finite number") from None

    def save(self, path: str | Path) -> Path:
        """Write JSON atomically, with matrix paths relative to the certificate's folder and
        the sha256 of the content; what `verify` would refuse is never written, nor is a
        certificate whose cost matrix was given in memory (no file `verify` could check).

        `path` follows the one overwrite rule of every command that writes
        (`pacplan.io.outputs`): never one of the certificate's own matrices (`pacplan.certify(
        "c.npy").save("c.npy")` replaced the costs), nor inside a planner or run directory
        (only the run holding its lock writes there), nor a folder or device.
        """
        from pacplan.io.outputs import refuse_overwriting

        path = Path(path)
        if not self.cert_matrix.path or (self.test_matrix and not self.test_matrix.path):
            raise PacplanError(f"{path}: this certificate's cost matrix was given in memory, "
                               "not read from a file, so `pacplan verify` could not check it; "
                               "save the matrix (numpy.save) and certify the file")
        inputs = {"cost matrix": self.cert_matrix.path,
                  "test matrix": self.test_matrix.path if self.test_matrix else None}
        refuse_overwriting(path, "path", inputs, file=True, writer=True)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PacplanError(f"{path}: cannot make its folder {path.parent} "
                               f"({exc.strerror or exc})") from None
        d = self.to_dict()
        del d["content_sha256"]
        for key in ("cert_matrix", "test_matrix"):
            if d[key] is not None:
                d[key]["path"] = relative_path(d[key]["path"], path.parent)
        try:  # plain JSON types (no numpy scalars), and never a non-finite number
            d = json.loads(json.dumps(d, allow_nan=False))
        except ValueError:
            raise PacplanError(f"{path}: refusing to write a certificate holding a non-finite "
                               "number") from None
        d["content_sha256"] = certificate_content_sha256(d, source=str(path))
        try:
            atomic_write_json(path, d)
        except OSError as exc:  # a read-only folder, a full disk
            raise PacplanError(f"{path}: cannot write the certificate "
                               f"({exc.strerror or exc})") from None
        self.content_sha256 = d["content_sha256"]
        return path

    @classmethod
    def load(cls, path: str | Path) -> Certificate:
        """Read a certificate (strict JSON types, content hash checked when present); matrix
        paths are resolved against the certificate's folder. Numbers are not recomputed: that
        is `verify`."""
        return load_record(Path(path)).certificate


def relative_path(target: str | Path, folder: Path) -> str:
    """`target` as seen from `folder` (a record that survives moving both together)."""
    try:
        return os.path.relpath(Path(target).resolve(), folder.resolve())
    except ValueError:  # another drive on Windows
        return str(Path(target).resolve())


@dataclass(frozen=True)
class Loaded:
    certificate: Certificate
    record: CertificateRecord
    provenance: ProvenanceRecord | None


def load_record(path: Path, check_hash: bool = True) -> Loaded:
    """Parse and type-check a certificate file, and check its content hash if asked."""
    record, provenance = validate_record(read_json(path), str(path))
    if check_hash:
        check_content_hash(record, str(path))
    return Loaded(_to_certificate(record, path), record, provenance)


def _to_certificate(record: CertificateRecord, path: Path) -> Certificate:
    d = record.model_dump()
    for key in ("cert_matrix", "test_matrix"):
        if d[key] is not None:
            ref = MatrixRef(**d[key])
            try:
                ref.path = str((path.parent / ref.path).resolve())
            except (OSError, ValueError, RuntimeError):  # RuntimeError: a symlink loop
                raise PacplanError(f"{path}: field {key}.path is not a usable file path"
                                   ) from None
            d[key] = ref
    if d["beta"] == "inf":
        d["beta"] = math.inf
    return Certificate(**d)
