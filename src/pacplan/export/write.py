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
from pacplan.certify_policy.store import MARK as POLICY_MARK
from pacplan.errors import PacplanError
from pacplan.export.fixed import fixed_parts
from pacplan.export.folder import refuse_nonempty, whole_or_nothing, write_manifest
from pacplan.export.onnx_nets import (
    GYM_WEIGHTS,
    QUADRUPED_WEIGHTS,
    UAV_WEIGHTS,
    gym_net_onnx,
    quadruped_net_onnx,
    uav_conv_net_onnx,
    uav_net_onnx,
)
from pacplan.io.files import (
    atomic_write_bytes,
    atomic_write_json,
    load_npy,
    save_safetensors,
)
from pacplan.pacbayes.record import Certificate
from pacplan.run.provenance import verify_certificate
from pacplan.run.rundir import Manifest, RunDir
from pacplan_runtime.bundle import PLANNER, PLANNER_FORMAT

EVIDENCE = "run"
NET_DTYPE = {"uav": "float32", "quadruped": "float64", "gym": "float64"}
"""The worlds that have a planner runtime, and the float type their network computes in."""
Layout = tuple[tuple[str, tuple[int, ...]], ...]


def net_onnx(world: str, fixed: dict[str, Any]) -> bytes:
    """net.onnx of `world` (a gym world's, and a UAV's, depends on its policy family only)."""
    if world == "gym":
        return gym_net_onnx(fixed["family"])
    if world == "uav":
        return uav_net_onnx() if _uav_paper(fixed) else uav_conv_net_onnx()
    return quadruped_net_onnx()


def _uav_paper(fixed: dict[str, Any]) -> bool:
    """A UAV planner of the paper's net: its fixed parts name no other policy family."""
    return fixed.get("policy", "paper") == "paper"


def net_layout(world: str, fixed: dict[str, Any]) -> Layout:
    """The network's weight tensors, (name, shape), in the order of the flat policy θ."""
    if world == "uav" and not _uav_paper(fixed):
        from pacplan.worlds.uav.families import policy_family

        return policy_family(fixed["policy"], fixed.get("policy_width")).shapes
    if world != "gym":
        return UAV_WEIGHTS if world == "uav" else QUADRUPED_WEIGHTS
    sizes = {key: fixed.get(key) for key in ("obs_dim", "hidden", "actions")}
    return tuple((name, tuple(int(sizes[dim]) for dim in shape))  # type: ignore[arg-type]
                 for name, shape in GYM_WEIGHTS[fixed["family"]])


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
        family = "" if world != "uav" or _uav_paper(fixed) else \
            f" (policy {fixed['policy']}, policy_width {fixed.get('policy_width')})"
        raise PacplanError(f"policies.npy has {policies.shape[-1]} weights per policy but the "
                           f"{world}{family} network has {total}")
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
                "dtype": NET_DTYPE[world["name"]]},
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
    if not c.provenance or c.provenance["world"]["name"] not in NET_DTYPE:
        name = c.provenance.get("world", {}).get("name") if c.provenance else None
        raise PacplanError(f"refusing to export {run}: world {name!r} has no planner runtime "
                           "(uav, quadruped and gym do)")
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
