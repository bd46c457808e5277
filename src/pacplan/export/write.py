"""Export a run's certified planner into a self-contained directory.

    PLANNER/
      manifest.json        sha256 of every file below (the runtime checks them on load)
      planner.json         world, the posterior's support and probabilities, fixed parts
      net.onnx             the network (weights are inputs), weights.safetensors: (K, ...) each
      run/                 the evidence, copied byte for byte from the run directory: the
                           certificate, the cost matrices it references, policies.npy, the
                           prior, config.yaml and the run's manifest.json

run/ is a small run directory, so `pacplan verify` re-checks the certificate with the run
directory's own provenance checks, unchanged.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from pacplan import __version__
from pacplan.errors import PacplanError
from pacplan.export.fixed import fixed_parts
from pacplan.export.folder import refuse_nonempty, whole_or_nothing, write_manifest
from pacplan.io.files import (
    atomic_write_bytes,
    atomic_write_json,
    load_npy,
    save_safetensors,
)
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.provenance import verify_certificate
from pacplan.pipeline.rundir import Manifest, RunDir
from pacplan.policy_certification.store import MARK as POLICY_MARK
from pacplan.worlds.base import world_exporter
from pacplan.worlds.onnx_graph import Layout
from pacplan_runtime.bundle import PLANNER, PLANNER_FORMAT

EVIDENCE = "run"


def net_onnx(world: str, fixed: dict[str, Any]) -> bytes:
    """net.onnx of `world` (a gym world's, and a UAV's, depends on its policy family only)."""
    return world_exporter(world).net_onnx(fixed)


def net_dtype(world: str) -> str:
    """The float type the network of `world` computes in."""
    return world_exporter(world).net_dtype


def net_layout(world: str, fixed: dict[str, Any]) -> Layout:
    """The network's weight tensors, (name, shape), in the order of the flat policy θ."""
    return world_exporter(world).net_layout(fixed)


def certificate_path(run: Path, n: int | None) -> Path:
    """The run's main certificate.json, or certificates/N<n>.json."""
    if n is None:
        path = run / RunDir.CERTIFICATE
        if not path.is_file():
            raise PacplanError(f"{run}: no {RunDir.CERTIFICATE}; finish the run first")
        return path
    found = RunDir(run).certificates()
    if n not in found:
        have = ", ".join(str(k) for k in found) or "none"
        raise PacplanError(f"{run}: no certificate for N = {n} (certificates/ has N = {have})")
    return found[n]


def split_weights(world: str, policies: np.ndarray, fixed: dict[str, Any]
                  ) -> dict[str, np.ndarray]:
    """(K, d) flat policies -> {name: (K, *shape)} in the network's weight layout."""
    layout = net_layout(world, fixed)
    total = sum(int(np.prod(shape)) for _, shape in layout)
    if policies.ndim != 2 or total != policies.shape[1]:
        label = world_exporter(world).network_label(fixed)
        raise PacplanError(f"policies.npy has {policies.shape[-1]} weights per policy but the "
                           f"{label} network has {total}")
    out, i = {}, 0
    for name, shape in layout:
        size = int(np.prod(shape))
        out[name] = np.ascontiguousarray(
            policies[:, i : i + size].reshape(len(policies), *shape).astype(np.float32))
        i += size
    return out


def _keep_shipped_entries(evidence_dir: Path, shipped: set[str]) -> None:
    """The run's manifest.json, as the run wrote it, less the entries of files not shipped
    (baseline matrices): every entry left is checked by `verify`, none vouches for nothing."""
    manifest = Manifest(evidence_dir)
    manifest.entries = {k: v for k, v in manifest.entries.items() if k in shipped}
    manifest._save()


def planner_spec(c: Certificate, cert_rel: str) -> dict[str, Any]:
    """planner.json's content for certificate `c` (stored at `cert_rel`)."""
    world = c.provenance["world"]
    support = [i for i, p in enumerate(c.p) if p > 0.0]
    return {
        "format": PLANNER_FORMAT,
        "world": world,
        "certificate": cert_rel,
        "certified_cost": c.certified,
        "delta": c.delta,
        "posterior": {"policy_index": support, "probability": [c.p[i] for i in support],
                      "use": "draw one policy from these probabilities at the start of each "
                             "episode and act with it deterministically until the episode ends"},
        "policies_sha256": c.provenance["policies_sha256"],
        "net": {"onnx": "net.onnx", "weights": "weights.safetensors",
                "dtype": net_dtype(world["name"])},
        "fixed": fixed_parts(world["name"], world["options"]),
        "exported_by": f"pacplan {__version__}",
    }


def export_planner(run_dir: str | Path, out: str | Path, n: int | None = None) -> Path:
    """Write the planner of `run_dir`'s certificate (N = `n`, default the main one) to `out`;
    refuses a certificate that does not verify, and an `out` that is not empty. `run_dir` may
    be a `certify-policy` folder (`pacplan.export.policies`): its certified policies' planner.
    Nothing half-written is left in `out` when it fails."""
    run, out = Path(run_dir), Path(out)
    if (run / POLICY_MARK).is_file():
        from pacplan.export.policies import export_policy_folder

        export_policy_folder(run, out, n)
        return out
    if not (run / RunDir.MANIFEST).is_file():
        raise PacplanError(f"{run}: not a run directory (no {RunDir.MANIFEST}) nor a "
                           f"certify-policy folder (no {POLICY_MARK})")
    cert = certificate_path(run, n)
    try:
        c = verify_certificate(cert)
    except PacplanError as exc:
        raise PacplanError(f"refusing to export {run}: its certificate does not verify ({exc})"
                           ) from None
    name = c.provenance.get("world", {}).get("name") if c.provenance else None
    try:
        world_exporter(str(name))
    except PacplanError as exc:
        raise PacplanError(f"refusing to export {run}: {exc}") from None
    refuse_nonempty(out)
    cert_rel = f"{EVIDENCE}/{cert.relative_to(run).as_posix()}"
    try:
        spec = planner_spec(c, cert_rel)
    except PacplanError as exc:  # a gym policy family the runtime cannot fly
        raise PacplanError(f"refusing to export {run}: {exc}") from None
    with whole_or_nothing(out):
        _write_run_planner(run, out, c, cert, spec)
    return out


def _write_run_planner(run: Path, out: Path, c: Certificate, cert: Path,
                       spec: dict[str, Any]) -> None:
    policies = load_npy(run / RunDir.POLICIES, name=f"{run / RunDir.POLICIES}")
    world = spec["world"]["name"]
    weights = split_weights(world, policies[spec["posterior"]["policy_index"]], spec["fixed"])
    evidence = [cert.relative_to(run).as_posix(), RunDir.MANIFEST, RunDir.CONFIG, RunDir.PRIOR,
                RunDir.POLICIES]
    for ref in (c.cert_matrix, c.test_matrix):
        if ref is not None:
            evidence.append(Path(ref.path).relative_to(run.resolve()).as_posix())
    for rel in dict.fromkeys(evidence):
        (out / EVIDENCE / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run / rel, out / EVIDENCE / rel)
    _keep_shipped_entries(out / EVIDENCE, set(evidence))
    atomic_write_bytes(out / "net.onnx", net_onnx(world, spec["fixed"]))
    save_safetensors(out / "weights.safetensors", weights)
    atomic_write_json(out / PLANNER, spec)
    write_manifest(out)
