"""`pacplan verify PLANNER`: every file's hash, the certificate, and that the planner is the
certified object.

Checks, each failure one line naming the file: manifest.json's sha256 of every file; the
certificate in run/ with `verify_certificate` (the run directory's own checks: the matrices, the
prior, policies.npy against provenance.policies_sha256); planner.json's support and
probabilities against the certificate's p, its world and fixed parts against the ones pacplan
generates; weights.safetensors against the certified policies.npy rows; net.onnx against the
network pacplan writes. So an edit is caught even if manifest.json was re-hashed to match.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.export.fixed import fixed_parts
from pacplan.export.write import EVIDENCE, net_dtype, net_onnx, planner_spec, split_weights
from pacplan.io.files import npy_from_bytes
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.provenance import verify_certificate
from pacplan.pipeline.rundir import Manifest, RunDir
from pacplan_runtime.bundle import (
    MANIFEST,
    MANIFEST_FORMAT,
    PLANNER,
    PlannerError,
    checked_files,
    parse_json,
    parse_safetensors,
    planner_root,
    read_checked,
    read_json,
)
from pacplan_runtime.policies import POLICY_PLANNER_FORMAT
from pacplan_runtime.spec import check_spec


def is_planner_dir(path: Path) -> bool:
    """A folder whose manifest.json is a planner manifest (not a run directory's)."""
    try:
        return path.is_dir() and read_json(path / MANIFEST).get("format") == MANIFEST_FORMAT
    except (PlannerError, OSError, RuntimeError):  # RuntimeError: a symlink loop
        return False


def verify_planner(path: str | Path) -> Certificate:
    """Check a planner directory; returns its verified certificate or raises one line.

    Every file used is read once and its bytes hashed against manifest.json: the evidence in
    run/ is verified from a private copy of the checked bytes, so a file swapped during the
    check is never the one verified."""
    try:
        root = planner_root(path)
        files = checked_files(root)
        data = parse_json(read_checked(root, PLANNER, files), root / PLANNER)
        if data.get("format") == POLICY_PLANNER_FORMAT:  # certify-policy's policies
            from pacplan.export.policies_check import verify_policy_planner

            return verify_policy_planner(root, files, data)
        spec = check_spec(data, root / PLANNER, fixed=False)  # compared key by key below
    except PlannerError as exc:
        raise PacplanError(str(exc)) from None
    cert_rel = str(spec.get("certificate"))
    if not cert_rel.startswith(f"{EVIDENCE}/") or cert_rel not in files:
        raise PacplanError(f"{root / PLANNER}: certificate {cert_rel!r} is not a file in "
                           f"{EVIDENCE}/ listed in {MANIFEST}")
    c = _verify_evidence(root, files, cert_rel)
    outside = sorted(set(files) - {PLANNER, str(spec["net"]["onnx"]),
                                   str(spec["net"]["weights"])}
                     - {n for n in files if n.startswith(f"{EVIDENCE}/")})
    if outside:
        raise PacplanError(f"{root / outside[0]}: not a file pacplan export writes")
    _check_spec(root / PLANNER, spec, c)
    _check_whole_spec(root / PLANNER, spec, c, cert_rel)
    _check_weights(root, spec, files)
    return c


def _check_whole_spec(where: Path, spec: dict[str, Any], c: Certificate, cert_rel: str
                      ) -> None:
    """Every other field of planner.json is what export writes (only `exported_by`, the
    version that wrote it, may differ)."""
    expected = planner_spec(c, cert_rel)
    if not isinstance(spec.get("exported_by"), str):
        raise PacplanError(f"{where}: field exported_by must be a string")
    for key in sorted(set(spec) | set(expected)):
        if key != "exported_by" and not _same(spec.get(key), expected.get(key)):
            raise PacplanError(f"{where}: field {key} is not what pacplan export writes for "
                               "this certificate")


def _verify_evidence(root: Path, files: dict[str, str], cert_rel: str) -> Certificate:
    """The certificate in run/, verified with the run directory's checks on a copy of the
    bytes the manifest vouches for; messages name the planner's own paths."""
    with tempfile.TemporaryDirectory(prefix="pacplan-verify-") as tmp:
        try:
            for name in files:
                if name.startswith(f"{EVIDENCE}/"):
                    target = Path(tmp) / name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(read_checked(root, name, files))
        except PlannerError as exc:
            raise PacplanError(str(exc)) from None
        real = str(Path(tmp).resolve())
        try:
            c = verify_certificate(Path(tmp) / cert_rel)
        except PacplanError as exc:
            raise PacplanError(str(exc).replace(real, str(root)).replace(tmp, str(root))
                               ) from None
        evidence = {cert_rel, *(f"{EVIDENCE}/{name}" for name in (
            RunDir.MANIFEST, RunDir.CONFIG, RunDir.PRIOR, RunDir.POLICIES))}
        for ref in (c.cert_matrix, c.test_matrix):
            if ref is not None:
                evidence.add(Path(ref.path).resolve().relative_to(real).as_posix())
        entries = set(Manifest(Path(tmp) / EVIDENCE).entries)
    recorded = {f"{EVIDENCE}/{name}" for name in entries}
    shipped = evidence - {cert_rel, f"{EVIDENCE}/{RunDir.MANIFEST}", f"{EVIDENCE}/{RunDir.CONFIG}"}
    if recorded != shipped:
        odd = sorted(recorded ^ shipped)[0]
        why = "not shipped" if odd in recorded else "not recorded"
        raise PacplanError(f"{root / EVIDENCE / RunDir.MANIFEST}: its entries are not the "
                           f"shipped evidence ({odd} is {why}); pacplan export keeps the "
                           "entries of the files it ships")
    missing = sorted(evidence - set(files))
    if missing:
        raise PacplanError(f"{root / missing[0]}: missing; the planner's evidence is the "
                           "certificate, the matrices it references, the prior, policies.npy, "
                           "config.yaml and the run's manifest.json, each listed in "
                           f"{MANIFEST}")
    extra = sorted(name for name in files if name.startswith(f"{EVIDENCE}/")
                   and name not in evidence)
    if extra:
        raise PacplanError(f"{root / extra[0]}: not part of the evidence pacplan export "
                           "ships (the certificate, the matrices it references, the prior, "
                           "policies.npy, config.yaml and the run's manifest.json)")
    return c


def _same(a: Any, b: Any) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _check_spec(where: Path, spec: dict[str, Any], c: Certificate) -> None:
    """Support, probabilities, world and fixed parts are the certificate's and pacplan's."""
    world = c.provenance["world"]
    if not _same(spec.get("world"), world):
        raise PacplanError(f"{where}: world {spec.get('world')} is not the certificate's {world}")
    support = [i for i, p in enumerate(c.p) if p > 0.0]
    posterior = spec.get("posterior", {})
    if posterior.get("policy_index") != support:
        raise PacplanError(f"{where}: posterior.policy_index is not the support of the "
                           "certificate's p (the policies with p > 0)")
    probs = [c.p[i] for i in support]
    if posterior.get("probability") != probs:
        bad = next((k for k, (a, b) in enumerate(zip(posterior.get("probability") or [], probs))
                    if a != b), 0)
        raise PacplanError(f"{where}: posterior.probability differs from the certificate's p "
                           f"(entry {bad}, policy {support[bad]})")
    if spec.get("certified_cost") != c.certified or spec.get("delta") != c.delta:
        raise PacplanError(f"{where}: certified_cost or delta is not the certificate's")
    if spec.get("policies_sha256") != c.provenance["policies_sha256"]:
        raise PacplanError(f"{where}: policies_sha256 is not the certificate's")
    fixed = fixed_parts(world["name"], world["options"])
    for key, value in fixed.items():
        if not _same(spec.get("fixed", {}).get(key), value):
            raise PacplanError(f"{where}: fixed.{key} is not what the {world['name']} world "
                               "uses")
    if not _same(spec.get("fixed"), fixed) or spec.get("net", {}).get("dtype") != \
            net_dtype(world["name"]):
        raise PacplanError(f"{where}: fixed or net holds entries the world does not have")


def _check_weights(root: Path, spec: dict[str, Any], files: dict[str, str]) -> None:
    """weights.safetensors holds the certified policies' rows; net.onnx is pacplan's net."""
    world = spec["world"]["name"]
    onnx_path = root / spec["net"]["onnx"]
    where = root / spec["net"]["weights"]
    try:
        onnx_bytes = read_checked(root, spec["net"]["onnx"], files)
        policies_rel = f"{EVIDENCE}/{RunDir.POLICIES}"
        policies = npy_from_bytes(read_checked(root, policies_rel, files), str(root / policies_rel))
        weights = parse_safetensors(read_checked(root, spec["net"]["weights"], files), where)
    except PlannerError as exc:
        raise PacplanError(str(exc)) from None
    if onnx_bytes != net_onnx(world, spec["fixed"]):
        raise PacplanError(f"{onnx_path}: not the {world} network pacplan exports")
    index = spec["posterior"]["policy_index"]
    if policies.ndim != 2 or max(index) >= policies.shape[0]:
        raise PacplanError(f"{root / PLANNER}: posterior.policy_index names policies beyond "
                           f"the {policies.shape[0] if policies.ndim else 0} of "
                           f"{EVIDENCE}/{RunDir.POLICIES}")
    expected = split_weights(world, policies[index], spec["fixed"])
    if set(weights) != set(expected):
        raise PacplanError(f"{where}: tensors {sorted(weights)} are not {sorted(expected)}")
    for name, value in expected.items():
        if weights[name].dtype != value.dtype or not np.array_equal(weights[name], value):
            raise PacplanError(f"{where}: tensor {name} is not the certified policies' weights "
                               f"({EVIDENCE}/{RunDir.POLICIES} rows of the support)")
