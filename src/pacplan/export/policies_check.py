"""`pacplan verify PLANNER` for a planner of certify-policy policies: every file's hash, the
certificate in evidence/ with the certify-policy folder's own checks, and that the planner is
the certified object.

Each failure is one line naming the file: the evidence is verified from a private copy of the
bytes manifest.json vouches for; each shipped model must be the certified policy (an .onnx by
its sha256, a converted SB3 policy as the conversion of its shipped zip, whose sha256 is the
certified one, byte for byte); and planner.json, every field, must be what export writes for
this certificate and environment. So an edit is caught even if manifest.json was re-hashed.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

from pacplan.errors import PacplanError
from pacplan.export.policies import (
    KEY,
    is_evidence,
    policy_onnx,
    policy_planner_spec,
    spaces_of,
)
from pacplan.io.files import sha256_bytes
from pacplan.pacbayes.record import Certificate
from pacplan.policy_certification.kinds import PolicyKind
from pacplan.policy_certification.store import CERTIFICATE, CERTIFICATES, policy_labels
from pacplan_runtime.bundle import PLANNER, PlannerError, read_checked
from pacplan_runtime.policies import EVIDENCE, check_policy_spec


def verify_policy_planner(root: Path, files: dict[str, str], data: dict[str, Any]
                          ) -> Certificate:
    """Check the policy planner at `root` (its files hashed: `files`; planner.json: `data`)."""
    where = root / PLANNER
    try:
        spec = check_policy_spec(data, where)
    except PlannerError as exc:
        raise PacplanError(str(exc)) from None
    shipped = {PLANNER, *(e["onnx"] for e in spec["policies"]),
               *(e["source"] for e in spec["policies"] if isinstance(e.get("source"), str))}
    outside = sorted(n for n in files if n not in shipped and not (
        n.startswith(f"{EVIDENCE}/") and is_evidence(n[len(EVIDENCE) + 1:])))
    if outside:
        raise PacplanError(f"{root / outside[0]}: not a file pacplan export writes")
    chosen = spec["certificate"]
    if not _CHOSEN.fullmatch(chosen) or chosen not in files:
        raise PacplanError(f"{where}: certificate must be {EVIDENCE}/{CERTIFICATE} or one of "
                           f"{EVIDENCE}/{CERTIFICATES}/, listed in manifest.json")
    c, labels = _verify_evidence(root, files, chosen)
    record = c.provenance[KEY]
    observation, action = spaces_of(record)
    entries = []
    for j in (i for i, p in enumerate(c.p) if p > 0.0):
        entries.append(_check_model(root, files, j, labels[j], record, observation, action))
    expected = policy_planner_spec(c, entries, observation, action, str(root),
                                   chosen.removeprefix(f"{EVIDENCE}/"))
    for key in sorted(set(spec) | set(expected)):
        if key != "exported_by" and json.dumps(spec.get(key), sort_keys=True) != \
                json.dumps(expected.get(key), sort_keys=True):
            raise PacplanError(f"{where}: field {key} is not what pacplan export writes for "
                               "this certificate and environment")
    if not isinstance(spec.get("exported_by"), str):
        raise PacplanError(f"{where}: field exported_by must be a string")
    return c


def _read(root: Path, name: str, files: dict[str, str]) -> bytes:
    try:
        return read_checked(root, name, files)
    except PlannerError as exc:
        raise PacplanError(str(exc)) from None


def _check_model(root: Path, files: dict[str, str], j: int, label: str,
                 record: dict[str, Any], observation: Any, action: Any) -> dict[str, Any]:
    """Support policy j's shipped model is the certified policy; returns its planner entry."""
    kind, sha = record["policies"][j]["kind"], record["policies"][j]["sha256"]
    onnx_rel, source_rel = f"policies/{j}.onnx", f"sources/{j}.zip"
    if onnx_rel not in files:
        raise PacplanError(f"{root / onnx_rel}: missing; policy {label} has p > 0")
    model = _read(root, onnx_rel, files)
    converted = PolicyKind.of(kind) is not PolicyKind.ONNX  # as export wrote it
    if converted:
        if source_rel not in files:
            raise PacplanError(f"{root / source_rel}: missing; the certified zip of {label} "
                               "is the evidence its ONNX conversion is checked against")
        source = _read(root, source_rel, files)
        if sha256_bytes(source) != sha:
            raise PacplanError(f"{root / source_rel}: not the certified policy {label} (its "
                               "sha256 is not the certificate's)")
        want, _ = policy_onnx(str(root / source_rel), PolicyKind.of(kind), source, observation,
                              action)
        if model != want:
            raise PacplanError(f"{root / onnx_rel}: not the ONNX conversion of {source_rel} "
                               "that pacplan export writes")
    else:
        if sha256_bytes(model) != sha:
            raise PacplanError(f"{root / onnx_rel}: not the certified policy {label} (its "
                               "sha256 is not the certificate's)")
        policy_onnx(str(root / onnx_rel), PolicyKind.ONNX, model, observation, action)
    return {"index": j, "label": label, "kind": kind, "sha256": sha, "onnx": onnx_rel,
            "source": source_rel if converted else None}


_CHOSEN = re.compile(rf"{EVIDENCE}/({re.escape(CERTIFICATE)}|{CERTIFICATES}/N\d+(-T\d+)?"
                     r"-delta[0-9.e+-]+\.json)")
"""The certificate a policy planner may carry out: the folder's main one, or one by N."""


def _verify_evidence(root: Path, files: dict[str, str], chosen: str
                     ) -> tuple[Certificate, list[str]]:
    """The certificate `chosen` in evidence/, verified with the certify-policy folder's checks
    on a copy of the bytes the manifest vouches for; messages name the planner's own paths."""
    from pacplan.policy_certification.provenance import verify_saved_certificate

    with tempfile.TemporaryDirectory(prefix="pacplan-verify-") as tmp:
        for name in files:
            if name.startswith(f"{EVIDENCE}/"):
                target = Path(tmp) / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(_read(root, name, files))
        real = str(Path(tmp).resolve())
        try:
            c = verify_saved_certificate(Path(tmp) / chosen, reach_files=False)
        except PacplanError as exc:
            raise PacplanError(str(exc).replace(real, str(root)).replace(tmp, str(root))
                               ) from None
        labels = policy_labels(Path(tmp) / EVIDENCE, c.m)
    if not isinstance((c.provenance or {}).get(KEY), dict):
        raise PacplanError(f"{root / chosen}: not a certify-policy certificate "
                           "(no provenance.certify_policy)")
    return c, labels
