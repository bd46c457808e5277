"""What a certify-policy certificate certifies, inside its hashed content, and how `verify`
checks it against its folder.

The certificate's `provenance` is `{"certify_policy": {...}}`: every input the cost matrices
depend on (the environment's id, kwargs, Gymnasium version and code hash; the horizon; the cost
rule with its bounds and code hash; each policy's kind and sha256; the seeds; whether actions
were clipped), the files the policies were read from, and the library versions that ran them.
It is covered by the certificate's content_sha256, so it cannot be edited without `verify`
noticing. In its folder, `verify` also checks it against `certify-policy.json` (the stamp a
resumed command is matched against), the seed ranges against n and test_n, the matrices
against the folder's own, and each policy file that is still where it was against its sha256;
each disagreement is named by its field.
"""

from __future__ import annotations

import json
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from pacplan.certify_policy.policies import ImportedPolicy
from pacplan.certify_policy.store import COSTS, MARK, listed_matrix
from pacplan.errors import PacplanError
from pacplan.io.files import read_file_bytes, sha256_bytes
from pacplan.pacbayes.record import Certificate, Loaded
from pacplan.run.rundir import identity

KEY = "certify_policy"
"""The one key of a certify-policy certificate's provenance."""

NOT_INPUTS = ("policy_files", "policy_names", "versions")
"""Provenance fields that are records, not inputs the costs depend on."""
RANGES = ("cert", "test")
"""provenance.seeds' ranges of this certificate; the stamp holds the first seed they count
from, shared by every N certified in the folder."""

_LIBRARIES = ("pacplan", "gymnasium", "numpy", "torch", "onnxruntime", "stable-baselines3",
              "mujoco")


def provenance(inputs: dict[str, Any], loaded: list[ImportedPolicy],
               seeds: dict[str, list[int] | None]) -> dict[str, Any]:
    """The certificate's provenance for a command with these inputs, policies and seeds."""
    files = []
    for p in loaded:
        path = Path(p.label)
        if p.kind != "callable" and path.is_file():
            files.append({"label": p.label, "path": str(path.resolve()), "sha256": p.sha256})
    ranges = {"cert": seeds["cert"], "test": seeds["test"]}
    return {KEY: {**inputs, "seeds": {**inputs["seeds"], **ranges}, "policy_files": files,
                  "policy_names": [p.label for p in loaded], "versions": versions()}}


def versions() -> dict[str, str]:
    """Python's and the installed libraries' versions (those that are installed)."""
    found = {"python": platform.python_version()}
    for name in _LIBRARIES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def policy_dir_of(path: Path) -> Path | None:
    """The certify-policy folder holding this certificate (<dir>/ or <dir>/certificates/)."""
    try:
        folder = path.resolve().parent
    except (OSError, RuntimeError):
        return None
    for candidate in (folder, folder.parent if folder.name == "certificates" else None):
        if candidate is not None and (candidate / MARK).is_file():
            return candidate
    return None


class PolicyDirProvenance:
    """The `pacplan.pacbayes.verify.ProvenanceCheck` of a certify-policy folder."""

    def vouches(self, path: Path) -> bool:
        return policy_dir_of(path) is not None

    def problems(self, path: Path, loaded: Loaded) -> list[str]:
        folder = policy_dir_of(path)
        return [] if folder is None else _check(folder, loaded)


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check(folder: Path, loaded: Loaded) -> list[str]:
    record = loaded.record.provenance.get(KEY) if loaded.record.provenance else None
    if not isinstance(record, dict):
        return [f"provenance does not say what was certified (no provenance.{KEY}): it was "
                f"written before pacplan recorded it; run the same certify-policy command on "
                f"{folder} again to re-certify the stored costs"]
    stamp = _stamp(folder)
    inputs = stamp.get("inputs")
    if not isinstance(inputs, dict) or stamp.get("identity") != identity(inputs):
        return [f"{MARK} was edited: its identity is not the sha256 of its inputs"]
    problems = []
    claimed = {k: v for k, v in record.items() if k not in NOT_INPUTS}
    if isinstance(claimed.get("seeds"), dict):  # the stamp holds what every N shares
        claimed["seeds"] = {k: v for k, v in claimed["seeds"].items() if k not in RANGES}
    for key in sorted(set(claimed) | set(inputs)):
        if claimed.get(key) != inputs.get(key):
            problems.append(f"provenance.{KEY}.{key} is {_short(claimed.get(key))} but {MARK} "
                            f"says {_short(inputs.get(key))}")
    problems += _check_seeds(record.get("seeds"), loaded)
    problems += _check_matrices(folder, loaded)
    problems += _check_policy_files(record.get("policy_files"))
    names, given = record.get("policy_names"), stamp.get("policy_files")
    if names is not None and names != given:  # both: each policy as it was given
        problems.append(f"provenance.{KEY}.policy_names is {_short(names)} but {MARK} says "
                        f"{_short(given)}")
    return problems


def _stamp(folder: Path) -> dict[str, Any]:
    try:
        stamp = json.loads(read_file_bytes(folder / MARK, MARK).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise PacplanError(f"{folder / MARK} is not a readable certify-policy stamp") from None
    if not isinstance(stamp, dict):
        raise PacplanError(f"{folder / MARK} is not a certify-policy stamp (a JSON object)")
    return stamp


def _size(rng: Any) -> int | None:
    ok = isinstance(rng, list) and len(rng) == 2 and all(isinstance(v, int) for v in rng)
    return rng[1] - rng[0] if ok else None


def _check_seeds(seeds: Any, loaded: Loaded) -> list[str]:
    c = loaded.certificate
    if not isinstance(seeds, dict):
        return [f"provenance.{KEY}.seeds is not an object"]
    problems = []
    cert, test, first = seeds.get("cert"), seeds.get("test"), seeds.get("first")
    if _size(cert) != c.n or cert[0] != first:
        problems.append(f"provenance.{KEY}.seeds.cert {cert} is not the n = {c.n} "
                        f"certification seeds from seeds.first {first}")
    if (test is None) != (c.test_n is None) or (test is not None and (
            _size(test) != c.test_n or _size(cert) is None or test[0] != cert[1])):
        problems.append(f"provenance.{KEY}.seeds.test {test} is not the test_n = {c.test_n} "
                        "seeds after the certification seeds")
    return problems


def _check_matrices(folder: Path, loaded: Loaded) -> list[str]:
    """Each matrix is the folder's own, listed for exactly its rows (seed offsets)."""
    c = loaded.certificate
    problems = []
    for field, ref, role, offset in (("cert_matrix", c.cert_matrix, "cert", 0),
                                     ("test_matrix", c.test_matrix, "test", c.n)):
        if ref is None:
            continue
        name = listed_matrix(folder, offset, ref.rows, role)
        if name is None or Path(ref.path).resolve() != (folder / COSTS / name).resolve():
            problems.append(f"{field}.path is {ref.path}, not the matrix of this folder's "
                            f"{COSTS}/ listed for its {ref.rows} rows from seed offset {offset}")
    return problems


def _check_policy_files(files: Any) -> list[str]:
    if not isinstance(files, list):
        return [f"provenance.{KEY}.policy_files is not a list"]
    problems = []
    for entry in files:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            problems.append(f"provenance.{KEY}.policy_files holds {_short(entry)}, not "
                            "{label, path, sha256}")
            continue
        path = Path(entry["path"])
        if not path.is_file():  # moved or on another machine: the sha256 above still names it
            continue
        if sha256_bytes(read_file_bytes(path, str(path))) != entry.get("sha256"):
            problems.append(f"policy file {path} has changed since it was certified (its "
                            f"sha256 is not provenance.{KEY}.policy_files' "
                            f"{str(entry.get('sha256'))[:12]}…)")
    return problems


def verify_saved_certificate(path: str | Path) -> Certificate:
    """`verify` with the checks of the folder the certificate lives in: a certify-policy
    folder's (above) or a run directory's (`pacplan.run.provenance`)."""
    from pacplan.pacbayes.verify import verify
    from pacplan.run.provenance import RunDirProvenance

    p = Path(path)
    return verify(p, PolicyDirProvenance() if policy_dir_of(p) is not None
                  else RunDirProvenance())
