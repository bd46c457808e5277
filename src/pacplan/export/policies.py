"""Export the policies a `certify-policy` folder certified into a planner directory.

    PLANNER/
      manifest.json        sha256 of every file below (the runtime checks them on load)
      planner.json         the posterior's support and probabilities, certified cost and δ,
                           the environment (id, kwargs), horizon, cost rule, and the spaces
                           the runtime needs to act (observation size, action space)
      policies/<j>.onnx    policy j of the certificate (only those with p > 0): an .onnx policy
                           as certified, byte for byte; an SB3 zip converted
                           (`pacplan.export.stable_baselines_onnx`)
      sources/<j>.zip      the certified SB3 zip of a converted policy: `pacplan verify`
                           converts it again and compares bytes (the runtime never reads it)
      evidence/            the certify-policy folder's finished files, byte for byte: its
                           certificate, certify-policy.json, the cost matrices and their ledger

A `module:callable` policy cannot be exported: it is Python, not a file the runtime can run or
check. evidence/ is a certify-policy folder, so `pacplan verify` re-checks the certificate with
that folder's own checks, unchanged.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces

from pacplan import __version__
from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_bytes, atomic_write_json, read_file_bytes, sha256_bytes
from pacplan.pacbayes.record import Certificate
from pacplan.policy_certification.kinds import PolicyKind
from pacplan.policy_certification.store import CERTIFICATE, CERTIFICATES, LOCK, MARK, policy_labels
from pacplan_runtime.policies import EVIDENCE, POLICY_PLANNER_FORMAT

KEY = "certify_policy"


def spaces_of(record: dict[str, Any]) -> tuple[spaces.Space, spaces.Space]:
    """(observation, action) space of the certified environment, made as certify-policy
    made it (id and kwargs)."""
    from pacplan.policy_certification.rollout import NO_WEIGHTS
    from pacplan.worlds.base import make_world

    env = record["env"]
    options: dict[str, Any] = {"env_id": env["id"], "cost": "terminated", "policy": NO_WEIGHTS}
    if env.get("kwargs"):
        options["env_kwargs"] = env["kwargs"]
    made = make_world("gym", **options).make_env()  # type: ignore[attr-defined]
    try:
        return made.observation_space, made.action_space
    finally:
        made.close()


def action_json(space: spaces.Space, where: str) -> dict[str, Any]:
    """What the runtime needs of the action space (bounds: null where unbounded)."""
    if isinstance(space, spaces.Discrete):
        return {"space": "discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.Box):
        def bound(a: np.ndarray) -> list[float | None]:
            return [float(v) if np.isfinite(v) else None for v in a.reshape(-1).tolist()]
        return {"space": "box", "low": bound(space.low), "high": bound(space.high),
                "shape": [int(n) for n in space.shape], "dtype": str(space.dtype)}
    raise PacplanError(f"refusing to export {where}: action space {space} has no runtime "
                       "(Discrete or Box)")


def policy_onnx(label: str, kind: PolicyKind | None, data: bytes, observation: spaces.Space,
                action: spaces.Space) -> tuple[bytes, bool]:
    """(the ONNX bytes the runtime runs, whether they were converted) for a certified file:
    an .onnx file as it is, any other (an SB3 .zip) converted."""
    if kind is PolicyKind.ONNX:
        from pacplan.policy_certification.onnx_file import check_graph

        check_graph(label, data)
        return data, False
    from pacplan.export.stable_baselines_onnx import sb3_onnx
    from pacplan.policy_certification.stable_baselines import SB3Policy

    policy = SB3Policy(label, data, observation, action)
    return sb3_onnx(policy, spaces.flatdim(observation), action), True


def policy_planner_spec(c: Certificate, entries: list[dict[str, Any]],
                        observation: spaces.Space, action: spaces.Space,
                        where: str, chosen: str = CERTIFICATE) -> dict[str, Any]:
    """planner.json's content for certify-policy certificate `c` (the folder's file `chosen`)
    and its support's models."""
    record = c.provenance[KEY]
    support = [i for i, p in enumerate(c.p) if p > 0.0]
    return json.loads(json.dumps({
        "format": POLICY_PLANNER_FORMAT,
        "certificate": f"{EVIDENCE}/{chosen}",
        "certified_cost": c.certified,
        "delta": c.delta,
        "posterior": {"policy_index": support, "probability": [c.p[i] for i in support],
                      "use": "draw one policy from these probabilities at the start of each "
                             "episode and act with it deterministically until the episode ends"},
        "policies": entries,
        "environment": record["env"],
        "horizon": record["horizon"],
        "cost": record["cost"],
        "clip_actions": "actions" in record,
        "observation": {"dim": spaces.flatdim(observation), "space": str(observation),
                        "flatten": "gymnasium.spaces.flatten(observation_space, obs)"},
        "action": action_json(action, where),
        "exported_by": f"pacplan {__version__}",
    }))


def certified_file(record: dict[str, Any], j: int, label: str, folder: Path) -> bytes:
    """The bytes of policy j's file as certified (found by its sha256 among the recorded
    files), or one line saying why it cannot be exported."""
    policy = record["policies"][j]
    kind = PolicyKind.of(policy.get("kind"))
    if kind is PolicyKind.CALLABLE:
        raise PacplanError(f"refusing to export {folder}: policy {label} is a module:callable, "
                           "Python code rather than a file the runtime can run and check; "
                           "export it to .onnx and certify that file")
    if kind is None or not kind.runtime_runs:
        raise PacplanError(f"refusing to export {folder}: policy {label} "
                           f"({policy.get('kind')}) is not an "
                           ".onnx file or an SB3 .zip, the policies the runtime can run; "
                           "export it to .onnx and certify that file")
    for entry in record.get("policy_files") or []:
        if isinstance(entry, dict) and entry.get("sha256") == policy["sha256"]:
            path = Path(str(entry.get("path")))  # relative to the folder (or, before: absolute)
            path = path if path.is_absolute() else folder / path
            if path.is_file():
                data = read_file_bytes(path, f"policy {label}")
                if sha256_bytes(data) == policy["sha256"]:
                    return data
            raise PacplanError(f"refusing to export {folder}: policy file {path} is missing or "
                               "has changed since it was certified; the planner ships the "
                               "certified file")
    raise PacplanError(f"refusing to export {folder}: the certificate records no file for "
                       f"policy {label}")


def is_evidence(rel: str) -> bool:
    """Whether a path of a certify-policy folder is one of its finished records: the stamp,
    a certificate, a cost matrix or the matrices' ledger (not the lock, a report, chunks of
    an unfinished matrix, or a file someone put there)."""
    return re.fullmatch(rf"{re.escape(MARK)}|{re.escape(CERTIFICATE)}|certificates/[^/]+\.json"
                        r"|costs/[^/]+\.npy|costs/ledger\.jsonl", rel) is not None


def evidence_files(folder: Path) -> list[str]:
    """The folder's finished records (relative POSIX paths), each a regular file."""
    return [rel for path in sorted(folder.rglob("*"))
            if is_evidence(rel := path.relative_to(folder).as_posix())
            and path.is_file() and not path.is_symlink()]


def export_policies(folder: Path, out: Path, c: Certificate,
                    chosen: str = CERTIFICATE) -> None:
    """Write the planner of certify-policy folder `folder` (whose certificate `c`, the file
    `chosen` there, verified) into the empty folder `out`."""
    record = c.provenance[KEY]
    labels = policy_labels(folder, c.m)
    support = [j for j, p in enumerate(c.p) if p > 0.0]
    data = {j: certified_file(record, j, labels[j], folder) for j in support}
    observation, action = spaces_of(record)
    entries = []
    for j in support:
        kind = record["policies"][j]["kind"]
        onnx_bytes, converted = policy_onnx(labels[j], PolicyKind.of(kind), data[j],
                                            observation, action)
        entry = {"index": j, "label": labels[j], "kind": kind,
                 "sha256": record["policies"][j]["sha256"], "onnx": f"policies/{j}.onnx",
                 "source": f"sources/{j}.zip" if converted else None}
        (out / "policies").mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out / entry["onnx"], onnx_bytes)
        if converted:
            (out / "sources").mkdir(exist_ok=True)
            atomic_write_bytes(out / str(entry["source"]), data[j])
        entries.append(entry)
    spec = policy_planner_spec(c, entries, observation, action, str(folder), chosen)
    for rel in evidence_files(folder):
        (out / EVIDENCE / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / rel, out / EVIDENCE / rel)
    atomic_write_json(out / "planner.json", spec)


def export_policy_folder(folder: Path, out: Path, n: int | None = None) -> None:
    """`pacplan export` of a certify-policy folder: its certificate.json verified (under the
    folder's lock, so no certify-policy command changes it meanwhile), then the planner
    written whole or not at all."""
    from pacplan.export.folder import refuse_nonempty, whole_or_nothing, write_manifest
    from pacplan.pipeline.lock import hold
    from pacplan.policy_certification.provenance import verify_saved_certificate

    if not (folder / CERTIFICATE).is_file():
        raise PacplanError(f"{folder}: no {CERTIFICATE} yet, nothing certified to export; "
                           "finish `pacplan certify-policy` there first")
    refuse_nonempty(out)
    with hold(folder, folder / LOCK):
        chosen = CERTIFICATE if n is None else chosen_certificate(folder, n)
        try:
            c = verify_saved_certificate(folder / chosen)
        except PacplanError as exc:
            raise PacplanError(f"refusing to export {folder}: its certificate does not verify "
                               f"({exc})") from None
        if not isinstance((c.provenance or {}).get(KEY), dict):
            raise PacplanError(f"refusing to export {folder}: its certificate does not record "
                               "what it certifies (no provenance.certify_policy); run the same "
                               "certify-policy command again to re-certify it")
        if "obs_normalization" in c.provenance[KEY]:
            raise PacplanError(f"refusing to export {folder}: its policies act on observations "
                               "normalized with VecNormalize statistics (obs_normalization), "
                               "which the planner cannot carry yet; the runtime would act on "
                               "raw observations, not the certified policy")
        with whole_or_nothing(out):
            export_policies(folder, out, c, chosen)
            write_manifest(out)


def chosen_certificate(folder: Path, n: int) -> str:
    """certificates/N<n>….json for `export --n`: the one with the main certificate's δ and
    test seeds, else the only one of that N; several or none is one line listing them."""
    import json

    found = sorted(p for p in (folder / CERTIFICATES).glob(f"N{n}-*.json") if p.is_file())
    if not found:
        have = sorted({p.name.split("-")[0] for p in (folder / CERTIFICATES).glob("N*.json")})
        raise PacplanError(f"--n {n}: {folder} holds no certificate for N = {n} (it has "
                           f"{', '.join(have) or 'none'})")
    try:
        main = json.loads((folder / CERTIFICATE).read_text(encoding="utf-8"))
        suffix = f"-T{main['test_n']}" if main.get("test_n") else ""
        same = folder / CERTIFICATES / f"N{n}{suffix}-delta{main['delta']:g}.json"
    except (OSError, ValueError, KeyError, TypeError):
        same = None
    if same is not None and same in found:
        return f"{CERTIFICATES}/{same.name}"
    if len(found) == 1:
        return f"{CERTIFICATES}/{found[0].name}"
    raise PacplanError(f"--n {n}: {folder} holds several certificates for N = {n} "
                       f"({', '.join(p.name for p in found)}); none has the main "
                       "certificate's δ and test seeds")
