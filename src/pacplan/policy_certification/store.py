"""The directory `certify-policy --out` writes, resumable and never half-made.

    certify-policy.json      what is certified: environment, cost, policies (sha256), seeds
    certify-policy.lock      one process at a time (`pacplan.pipeline.lock`)
    costs/cert.npy           N × m certification costs (row i: seed first_seed + i)
    costs/test.npy           T × m test costs (the T seeds after them), with --test-n
    costs/ledger.jsonl       the sha256 of each finished matrix
    costs/<role>.chunks/     finished rows of a matrix in progress (`execution.chunks`)
    certificate.json         the certificate, which `pacplan verify` checks from costs/

The stamp (certify-policy.json) is written before any rollout; a later command with the same
inputs resumes (finished rows are kept after a kill, each checked against its sha256), one with
other inputs is refused. The certificate is rebuilt on every command, so a new δ needs no new
rollout. A directory this command created is removed again when the command is refused (a
cost function that raises, say), so a failure leaves nothing half-made; a kill keeps it.
"""

from __future__ import annotations

import contextlib
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError, short
from pacplan.io.files import atomic_write_json, npy_bytes, npy_from_bytes, read_file_bytes
from pacplan.io.outputs import protecting_folder, refuse_overwriting, same_file
from pacplan.io.undo import undone_on_failure
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.execution.chunks import ChunkStore, Ledger
from pacplan.pipeline.rundir import identity

MARK = "certify-policy.json"
CERTIFICATES = "certificates"
"""certificates/: one certificate per N, T and δ ever certified in the folder."""
LOCK = "certify-policy.lock"
COSTS = "costs"
CERTIFICATE = "certificate.json"
CHUNK_ROWS = 10
"""Rows per chunk: a kill loses at most this many seeds' rollouts."""
ROWS = "rows.chunks"
"""costs/rows.chunks/: finished chunks of rows not yet in a matrix, keyed by seed offset."""


def default_out(env_id: str) -> Path:
    """runs/certify-<env_id>, the id reduced to characters safe in a folder name."""
    return Path("runs") / ("certify-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", env_id).strip("-."))


def is_policy_dir(path: str | Path) -> bool:
    """Whether `path` is a directory `certify-policy` made."""
    return (Path(path) / MARK).is_file()


def refuse_output(out: Path, inputs: dict[str, str | Path | None], option: str) -> None:
    """`out` must be a new or empty folder, or a certify-policy directory to resume; never an
    input, nor inside a planner or run directory (`pacplan.io.outputs`)."""
    if not is_policy_dir(out):
        refuse_overwriting(out, option, inputs)
        # only a lock: a command stopped before its stamp was written, nothing to keep
        if out.exists() and (not out.is_dir() or any(e.name != LOCK for e in out.iterdir())):
            raise PacplanError(f"{option} {out} exists and is not a certify-policy directory "
                               f"(it has no {MARK}): choose a new folder")
        return
    for name, path in inputs.items():
        if path is not None and same_file(out, path):
            raise PacplanError(f"{option} {out} is the input {name}: choose another output")
    inside = protecting_folder(out, itself=False)
    if inside is not None:
        raise PacplanError(f"{option} {out} is inside the {inside[0]} {inside[1]}: choose a "
                           "path outside it")


def removed_if_refused(out: Path) -> contextlib.AbstractContextManager[None]:
    """Undo a new folder (absent or empty before, `refuse_output`) when this command is
    refused (a `PacplanError`) or fails to write (an `OSError`: a full disk, a read-only
    folder): what this command made there is removed, so a rerun is not blocked by a half-made
    folder; a kill or Ctrl-C keeps it, to be resumed, and a folder being resumed is always
    kept."""
    if is_policy_dir(out):
        return contextlib.nullcontext()
    return undone_on_failure(out, on=(PacplanError, OSError))


def stamp(out: Path, inputs: dict[str, Any], option: str,
          notes: dict[str, Any] | None = None) -> None:
    """Write the stamp, or check that the one there names the same inputs; `notes` (where the
    policy files were) are recorded but are not part of the identity."""
    path = out / MARK
    record = {"identity": identity(inputs), "inputs": inputs, **(notes or {})}
    if not path.is_file():
        atomic_write_json(path, record)
        return
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        old_inputs = old["inputs"]
    except (ValueError, KeyError, TypeError, OSError, RecursionError):
        raise PacplanError(f"{path}: not a readable certify-policy stamp; choose a new "
                           f"{option}") from None
    if old.get("identity") != record["identity"] or identity(old_inputs) != record["identity"]:
        differs, was, now = _first_difference(old_inputs, inputs)
        raise PacplanError(f"{option} {out} holds a certify-policy run of other inputs "
                           f"({differs} was {short(was, 80, as_json=True)}, now "
                           f"{short(now, 80, as_json=True)}): choose a new "
                           f"{option} or delete that folder")


def policy_labels(out: Path, m: int) -> list[str]:
    """Each column's policy as it was given (the stamp's note), or 'policy j'."""
    try:
        given = json.loads(read_file_bytes(out / MARK, MARK)).get("policy_files")
    except (ValueError, AttributeError, UnicodeDecodeError):
        given = None
    ok = isinstance(given, list) and len(given) == m and all(isinstance(v, str) for v in given)
    return list(given) if ok else [f"policy {j}" for j in range(m)]


def _first_difference(old: Any, new: Any, path: str = "") -> tuple[str, Any, Any]:
    """(dotted key, old value, new value) of the first difference between two records,
    descending into objects (`env.provider`, not the whole env record cut short)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*new, *(k for k in old if k not in new)]:
            if old.get(key) != new.get(key):
                return _first_difference(old.get(key), new.get(key),
                                         f"{path}.{key}" if path else str(key))
    return path or "inputs", old, new


_MATRIX = re.compile(r"(cert|test)(-N\d+(-T\d+)?)?\.npy")


def _fits_matrix(entry: dict[str, Any]) -> bool:
    """A matrix's ledger entry: its file, and the rows it holds (seed offsets from the first
    seed: offset … offset + rows − 1)."""
    return (_MATRIX.fullmatch(entry["file"]) is not None
            and all(isinstance(entry.get(k), int) and entry[k] >= 0 for k in ("offset", "rows")))


def matrix_name(role: str, n: int, test_n: int, ledger_files: set[str]) -> str:
    """costs/cert.npy and costs/test.npy for a folder's first N; cert-N<n>.npy and
    test-N<n>-T<t>.npy for each N (or T) certified after it, so every certificate's matrices
    stay as they were."""
    first = f"{role}.npy"
    if first not in ledger_files:
        return first
    return f"cert-N{n}.npy" if role == "cert" else f"test-N{n}-T{test_n}.npy"


def listed_files(out: Path) -> list[str]:
    """The matrices the folder's ledger lists."""
    return list(Ledger(out / COSTS, "file", _fits_matrix, "cost matrix").entries)


def certificate_name(c: Certificate) -> str:
    """certificates/N<n>[-T<t>]-delta<δ>.json: a new N, T or δ never replaces an earlier one."""
    test = f"-T{c.test_n}" if c.test_n else ""
    return f"N{c.n}{test}-delta{c.delta:g}.json"


def listed_matrix(out: Path, offset: int, rows: int, role: str) -> str | None:
    """The listed matrix of `role` holding exactly rows offset … offset + rows − 1."""
    ledger = Ledger(out / COSTS, "file", _fits_matrix, "cost matrix")
    for name, entry in ledger.entries.items():
        if (name.startswith(role) and entry["offset"] == offset and entry["rows"] == rows
                and (out / COSTS / name).is_file()):
            return name
    return None


def cost_matrix(out: Path, role: str, name: str, offset: int, rows: int, m: int,
                inputs: dict[str, Any],
                compute: Callable[[list[tuple[int, int]]], Iterator[tuple[int, np.ndarray]]],
                started: Callable[[int], None] | None = None) -> Path:
    """costs/<name>: the costs of seeds offset … offset + rows − 1 (offsets from the first
    seed). A listed matrix holding exactly these rows is used as it is; otherwise each row is
    taken from any finished matrix of the folder that holds it (a larger N reuses the smaller
    N's certification and test rows, byte for byte), then from finished chunks, and
    `compute(ranges)` rolls out the rest, ten rows to a chunk, yielding (index into ranges,
    rows start … stop − 1) as each finishes, in any order. `started(done_rows)` is told how
    many rows were already there."""
    folder = out / COSTS
    folder.mkdir(parents=True, exist_ok=True)
    ledger = Ledger(folder, "file", _fits_matrix, "cost matrix")
    vouched = _vouched(out, ledger)
    found = listed_matrix(out, offset, rows, role)
    if found in vouched and ledger.read(found) is not None:  # finished and unchanged
        if started is not None:
            started(rows)
        return folder / found
    try:
        matrix = np.empty((rows, m), dtype=np.float64)
        have = np.zeros(rows, dtype=bool)
    except MemoryError:  # `certify._check_matrix_memory` estimates; this is the last word
        raise PacplanError(f"a cost matrix of {rows:,} seeds × {m} policies does not fit in "
                           "memory: certify fewer seeds") from None
    for listed, entry in ledger.entries.items():
        lo, hi = max(offset, entry["offset"]), min(offset + rows, entry["offset"] + entry["rows"])
        if listed not in vouched or lo >= hi or have[lo - offset: hi - offset].all():
            continue
        data = ledger.read(listed)
        if data is None:
            continue
        source = npy_from_bytes(data, str(folder / listed))
        if source.shape != (entry["rows"], m):
            continue
        matrix[lo - offset: hi - offset] = source[lo - entry["offset"]: hi - entry["offset"]]
        have[lo - offset: hi - offset] = True
    store = ChunkStore(folder / ROWS, inputs)
    grid = [(slice(a, b), slice(0, m)) for a, b in _missing(have, offset)]
    done = store.done(grid)
    if started is not None:
        started(int(have.sum()) + sum(s.stop - s.start for s, _ in grid if (s.start, 0) in done))
    todo = [s for s, _ in grid if (s.start, 0) not in done]
    for i, block in compute([(s.start, s.stop) for s in todo]):
        store.save((todo[i].start, 0), block)
    for s, _ in grid:
        matrix[s.start - offset: s.stop - offset] = store.block(s, slice(0, m))
    ledger.write(name, npy_bytes(matrix), offset=offset, rows=rows)
    return folder / name


def _vouched(out: Path, ledger: Ledger) -> set[str]:
    """The listed matrices a certificate of the folder used, with the sha256 it recorded: only
    their rows are reused. A listed sha256 that is not the certificate's is refused: someone
    edited a matrix and re-hashed it in the ledger (the certificate's content hash covers its
    record of the matrix, so both would have to be forged)."""
    from pacplan.pacbayes.record import load_record

    costs = (out / COSTS).resolve()
    found: set[str] = set()
    for path in [out / CERTIFICATE, *sorted((out / CERTIFICATES).glob("*.json"))]:
        try:
            c = load_record(path).certificate
        except (PacplanError, OSError):  # absent or unreadable: it vouches for nothing
            continue
        for ref in (c.cert_matrix, c.test_matrix):
            if ref is None or Path(ref.path).parent != costs:
                continue
            name, entry = Path(ref.path).name, ledger.entries.get(Path(ref.path).name)
            if entry is not None and entry["sha256"] != ref.sha256:
                raise PacplanError(f"{costs / name}: {COSTS}/ledger.jsonl lists sha256 "
                                   f"{entry['sha256'][:12]}…, but {path.name} certified "
                                   f"{ref.sha256[:12]}…: the folder's costs were edited; "
                                   "certify into a new folder")
            if entry is not None:
                found.add(name)
    return found


def _missing(have: np.ndarray, offset: int) -> list[tuple[int, int]]:
    """The offset ranges not yet held, cut at multiples of CHUNK_ROWS (so the chunks of a
    killed command line up with the next one's); found with numpy, not a Python list a row."""
    edges = np.diff(np.concatenate(([False], ~have, [False])).astype(np.int8))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    ranges = []
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        a, b = offset + start, offset + stop
        while a < b:
            cut = min(b, (a // CHUNK_ROWS + 1) * CHUNK_ROWS)
            ranges.append((a, cut))
            a = cut
    return ranges


def remove_chunks(out: Path) -> None:
    """Drop the finished chunks once every matrix they fed is written and listed."""
    shutil.rmtree(out / COSTS / ROWS, ignore_errors=True)
