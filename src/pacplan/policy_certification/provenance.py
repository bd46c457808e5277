"""What a certify-policy certificate certifies, inside its hashed content, and how `verify`
checks it against its folder.

The certificate's `provenance` is `{"certify_policy": {...}}`: every input the cost matrices
depend on (the environment's id, kwargs, Gymnasium version, registration and code hash; the
horizon; the cost rule with its bounds and code hash; each policy's kind and sha256; the seeds;
whether actions were clipped), every file the command read (policy files, each user file its
identity hashed, the normalization statistics: a path relative to the folder and a sha256),
and the library versions that ran them. It is covered by the certificate's content_sha256, so
it cannot be edited without `verify` noticing. In its folder, `verify` also checks it against
`certify-policy.json` (the stamp a resumed command is matched against), the seed ranges against
n and test_n, the matrices against the folder's own, and re-hashes each recorded file where it
lies relative to the folder (nothing is imported or run); each disagreement is named, and what
could not be checked (a file not found, an object no file holds) is listed, never called OK.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from pacplan.errors import PacplanError, short
from pacplan.io.files import read_file_bytes, sha256_bytes
from pacplan.pacbayes.record import Certificate, Loaded
from pacplan.pacbayes.verify import Verified, folder_holding
from pacplan.pipeline.rundir import identity
from pacplan.policy_certification.kinds import PolicyKind
from pacplan.policy_certification.policies import ImportedPolicy
from pacplan.policy_certification.store import COSTS, MARK, listed_matrix

KEY = "certify_policy"
"""The one key of a certify-policy certificate's provenance."""

NOT_INPUTS = ("policy_files", "files", "policy_names", "versions")
"""Provenance fields that are records, not inputs the costs depend on."""
RANGES = ("cert", "test")
"""provenance.seeds' ranges of this certificate; the stamp holds the first seed they count
from, shared by every N certified in the folder."""

_LIBRARIES = ("pacplan", "gymnasium", "numpy", "torch", "onnxruntime", "stable-baselines3",
              "mujoco")


def provenance(inputs: dict[str, Any], loaded: list[ImportedPolicy],
               seeds: dict[str, list[int] | None], folder: Path,
               code: Mapping[Path, str] | None = None,
               normalization: tuple[str, str] | None = None) -> dict[str, Any]:
    """The certificate's provenance for a command with these inputs, policies and seeds,
    written in `folder`: every file it read is recorded by its path relative to the folder
    and its sha256 (policy files; `code`, the user files its identity hashed; the
    normalization statistics' (path, sha256)), so `verify` can re-hash each from any copy of
    the folder and its surroundings, without running anything."""
    files = []
    for p in loaded:
        path = Path(p.label)
        if p.kind is not PolicyKind.CALLABLE and p.source == "file" and path.is_file():
            files.append({"label": p.label, "path": _relative(path, folder),
                          "sha256": p.sha256})
    others = [{"of": "user code", "path": _relative(path, folder), "sha256": sha}
              for path, sha in sorted((code or {}).items())]
    if normalization is not None:
        others.append({"of": "obs_normalization", "path": _relative(Path(normalization[0]),
                                                                    folder),
                       "sha256": normalization[1]})
    ranges = {"cert": seeds["cert"], "test": seeds["test"]}
    return {KEY: {**inputs, "seeds": {**inputs["seeds"], **ranges}, "policy_files": files,
                  "files": others, "policy_names": [p.label for p in loaded],
                  "versions": versions()}}


def _relative(path: Path, folder: Path) -> str:
    """`path` relative to `folder` (POSIX form), whatever folder the command ran in."""
    return Path(os.path.relpath(path.resolve(), folder.resolve())).as_posix()


def recorded_path(entry: dict[str, Any], folder: Path) -> Path | None:
    """Where a recorded file lies, relative to the certify-policy `folder`; None for an
    absolute path (written before paths were relative: the machine that made it, not this
    folder's surroundings, is what it names)."""
    path = Path(str(entry.get("path")))
    return None if path.is_absolute() else folder / path


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
    return folder_holding(path, MARK)


class PolicyDirProvenance:
    """The `pacplan.pacbayes.verify.ProvenanceCheck` of a certify-policy folder; with
    `reach_files`, the files it records are re-hashed where they lie relative to the folder
    (a planner's evidence copy has no surroundings: its models are checked by the planner)."""

    def __init__(self, reach_files: bool = True) -> None:
        self.reach_files = reach_files

    def vouches(self, path: Path) -> bool:
        return policy_dir_of(path) is not None

    def problems(self, path: Path, loaded: Loaded) -> list[str]:
        folder = policy_dir_of(path)
        if folder is None:
            return []
        problems = _check(folder, loaded)
        if self.reach_files and not problems:
            problems += _reach_files(folder, _record(loaded))[0]
        return problems

    def unchecked(self, path: Path, loaded: Loaded) -> list[str]:
        """What the certificate rests on that verify could not re-check, one phrase each."""
        folder, record = policy_dir_of(path), _record(loaded)
        if folder is None or record is None:
            return []
        found = []
        for i, policy in enumerate(_list(record.get("policies"))):
            source = policy.get("source") if isinstance(policy, dict) else None
            if source == "unidentified":
                found.append(_UNIDENTIFIED.format(f"policy #{i}"))
            elif source == "object":
                found.append(f"policy #{i} ({policy.get('kind')}) is a Python object: its "
                             "weights' sha256 is recorded, but no file holds them to re-hash")
        for key, name in (("cost", "cost"), ("env", "id")):
            part = record.get(key)
            if isinstance(part, dict) and part.get("source") == "unidentified":
                what = "cost" if key == "cost" else "environment"
                found.append(_UNIDENTIFIED.format(f"{what} {part.get(name)}"))
        return found + (_reach_files(folder, record)[1] if self.reach_files else [])


_UNIDENTIFIED = ("{} is an unidentified Python object (its state is in no file): its rows "
                 "cannot be re-derived")


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _record(loaded: Loaded) -> dict[str, Any] | None:
    record = loaded.record.provenance.get(KEY) if loaded.record.provenance else None
    return record if isinstance(record, dict) else None


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
            was, now = short(claimed.get(key), as_json=True), short(inputs.get(key), as_json=True)
            problems.append(f"provenance.{KEY}.{key} is {was} but {MARK} says {now}")
    problems += _check_seeds(record.get("seeds"), loaded)
    problems += _check_matrices(folder, loaded)
    names, given = record.get("policy_names"), stamp.get("policy_files")
    if names is not None and names != given:  # both: each policy as it was given
        problems.append(f"provenance.{KEY}.policy_names is {short(names, as_json=True)} but "
                        f"{MARK} says {short(given, as_json=True)}")
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


def _reach_files(folder: Path, record: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(files that differ from their recorded sha256, files that could not be checked): each
    file the certificate records, re-hashed where it lies relative to `folder`."""
    problems: list[str] = []
    unchecked: list[str] = []
    entries = [("policy file", e) for e in _entries(record, "policy_files", problems)]
    entries += [(f"{e.get('of')} file", e) for e in _entries(record, "files", problems)]
    for what, entry in entries:
        path = recorded_path(entry, folder)
        if path is None:
            unchecked.append(f"{what} {entry['path']} is recorded by an absolute path of the "
                             "machine that made it: not checked")
            continue
        path = Path(os.path.normpath(path))
        if not path.is_file():
            unchecked.append(f"{what} {path} not found: not checked")
        elif sha256_bytes(read_file_bytes(path, str(path))) != entry["sha256"]:
            problems.append(f"{what} {path} has changed since it was certified (its sha256 "
                            f"is not the recorded {entry['sha256'][:12]}…)")
    if "files" not in record and _has_user_code(record):
        unchecked.append("user code: the certificate was written before pacplan recorded "
                         "which files it hashed, so they are not re-checked")
    return problems, unchecked


def _entries(record: dict[str, Any], key: str, problems: list[str]) -> list[dict[str, Any]]:
    """The file records under `key` (a malformed one is a problem, named)."""
    files = record.get(key, [])
    if not isinstance(files, list):
        problems.append(f"provenance.{KEY}.{key} is not a list")
        return []
    good = []
    for entry in files:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) \
                and isinstance(entry.get("sha256"), str):
            good.append(entry)
        else:
            problems.append(f"provenance.{KEY}.{key} holds {short(entry, as_json=True)}, not "
                            "{path, sha256, …}")
    return good


def _has_user_code(record: dict[str, Any]) -> bool:
    """Whether any input was identified by the sha256 of user files."""
    env, cost = record.get("env"), record.get("cost")
    return ((isinstance(env, dict) and "source_sha256" in env)
            or (isinstance(cost, dict) and "cost_source_sha256" in cost)
            or any(isinstance(p, dict) and PolicyKind.of(p.get("kind")) is PolicyKind.CALLABLE
                   and p.get("source", "file") == "file" for p in _list(record.get("policies"))))


def verify_saved_certificate(path: str | Path, reach_files: bool = True) -> Certificate:
    """`verify` with the checks of the folder the certificate lives in: a certify-policy
    folder's (above) or a run directory's (`pacplan.pipeline.provenance`)."""
    return verify_saved_in_full(path, reach_files).certificate


def verify_saved_in_full(path: str | Path, reach_files: bool = True) -> Verified:
    """`verify_saved_certificate`, also returning what could not be checked."""
    from pacplan.pacbayes.verify import verify_in_full
    from pacplan.pipeline.provenance import RunDirProvenance

    p = Path(path)
    if policy_dir_of(p) is not None:
        return verify_in_full(p, PolicyDirProvenance(reach_files))
    verified = verify_in_full(p, RunDirProvenance())
    if reach_files and KEY in (verified.certificate.provenance or {}):  # out of its folder
        return Verified(verified.certificate, (
            f"no {MARK} beside it: the certify-policy folder it was made in is not here, so "
            "its stamp and the files it records were not checked",))
    return verified
