"""Opening a planner directory for `Planner.load`: everything checked, each used file read once.

The order matters: the tree and every hash first (`checked_files`), then planner.json, net.onnx
and weights.safetensors are each read once more and their bytes hashed again and used (a file
swapped in between is refused, never used), then the cheap checks that make a re-hashed planner
safe to fly (`pacplan_runtime.spec`). onnxruntime gets the net's bytes, never its path.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

import numpy as np

from pacplan_runtime.bundle import (
    PLANNER,
    PlannerError,
    checked_files,
    parse_json,
    parse_safetensors,
    planner_root,
    read_checked,
)
from pacplan_runtime.decide import NetPolicies
from pacplan_runtime.policies import (
    POLICY_PLANNER_FORMAT,
    OnnxPolicies,
    check_policy_evidence,
    check_policy_spec,
)
from pacplan_runtime.spec import check_net, check_spec, check_weights


def open_planner(path: str | Path, threads: int) -> tuple[Path, dict[str, Any], Any]:
    """(root, planner.json, its policies) of a checked planner directory: a world's planner
    (one net, per-policy weights) or certified policies' (`pacplan_runtime.policies`); the
    policies act through `decide(slot, observation)`."""
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= 1024:
        raise PlannerError(f"threads must be an integer in [1, 1024], got {threads!r}")
    root = planner_root(path)
    files = checked_files(root)
    data = parse_json(read_checked(root, PLANNER, files), root / PLANNER)
    if data.get("format") == POLICY_PLANNER_FORMAT:
        spec = check_policy_spec(data, root / PLANNER)
        check_policy_evidence(root, spec, files)
        return root, spec, OnnxPolicies(root, spec, files, threads)
    spec = check_spec(data, root / PLANNER)
    weights, session = _open_net(root, spec, files, threads)
    return root, spec, NetPolicies(spec, weights, session)


def _open_net(root: Path, spec: dict[str, Any], files: dict[str, str], threads: int
              ) -> tuple[dict[str, np.ndarray], Any]:
    """A world planner's weights and net session, checked."""
    world, net = spec["world"]["name"], spec["net"]
    onnx_bytes = read_checked(root, net["onnx"], files)
    check_net(world, hashlib.sha256(onnx_bytes).hexdigest(), root / net["onnx"], spec["fixed"])
    weights = parse_safetensors(read_checked(root, net["weights"], files), root / net["weights"])
    session = _session(onnx_bytes, threads, root / net["onnx"])
    check_weights(weights, session, world, len(spec["posterior"]["policy_index"]),
                  root / net["weights"], spec["fixed"])
    _check_evidence(root, spec, files, weights, session, world)
    return weights, session


def _check_evidence(root: Path, spec: dict[str, Any], files: dict[str, str],
                    weights: dict[str, np.ndarray], session: Any, world: str) -> None:
    """The cheap ties to the evidence in run/: the posterior, certified cost and δ are the
    certificate's, and the weights are the rows of run/policies.npy at the support. (Whether
    the certificate itself holds is `pacplan verify`'s to say.)"""
    where = root / PLANNER
    cert_rel = spec.get("certificate")
    if not isinstance(cert_rel, str) or not cert_rel.startswith("run/"):
        raise PlannerError(f"{where}: field certificate must name the certificate in run/")
    cert = parse_json(read_checked(root, cert_rel, files), root / cert_rel)
    p = cert.get("p")
    if not isinstance(p, list) or not all(isinstance(v, (int, float))
                                          and not isinstance(v, bool) for v in p):
        raise PlannerError(f"{root / cert_rel}: field p is not a list of numbers")
    support = [i for i, v in enumerate(p) if v > 0.0]
    posterior = spec["posterior"]
    if posterior["policy_index"] != support or posterior["probability"] != [p[i] for i in
                                                                            support]:
        raise PlannerError(f"{where}: posterior differs from the certificate's p (the support "
                           f"and probabilities of {cert_rel})")
    provenance = cert.get("provenance")
    if not isinstance(provenance, dict) or provenance.get("world") != spec["world"]:
        raise PlannerError(f"{where}: world {spec['world']} is not the certificate's")
    if spec["certified_cost"] != cert.get("certified") or spec["delta"] != cert.get("delta"):
        raise PlannerError(f"{where}: certified_cost or delta is not the certificate's")
    policies_rel = "run/policies.npy"
    claimed = provenance.get("policies_sha256")
    if not spec.get("policies_sha256") == claimed == files.get(policies_rel):
        raise PlannerError(f"{where}: policies_sha256 is not the sha256 of {policies_rel} that "
                           "the certificate records")
    policies = _npy(read_checked(root, policies_rel, files), root / policies_rel)
    index = np.asarray(posterior["policy_index"], dtype=np.int64)
    names = [i.name for i in session.get_inputs() if i.name in weights]
    width = sum(int(np.prod(weights[n].shape[1:])) for n in names)
    if policies.ndim != 2 or policies.shape[1] != width or index.max() >= policies.shape[0]:
        raise PlannerError(f"{root / policies_rel}: shape {policies.shape} does not hold the "
                           f"support's policies of {width} weights each")
    rows, start = policies[index], 0
    for name in names:
        w = weights[name]
        size = int(np.prod(w.shape[1:]))
        expected = rows[:, start : start + size].reshape(w.shape).astype(np.float32)
        start += size
        if not np.array_equal(w, expected):
            raise PlannerError(f"{root / spec['net']['weights']}: tensor {name} is not the "
                               f"rows of {policies_rel} at the support")


def _npy(data: bytes, where: Path) -> np.ndarray:
    """A plain .npy from bytes (never a pickle), or one PlannerError."""
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise PlannerError(f"{where}: not a readable .npy array ({exc})") from None


def _session(onnx_bytes: bytes, threads: int, where: Path) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    try:
        return ort.InferenceSession(onnx_bytes, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own error types: one line naming the file
        reason = " ".join(str(exc).split())[:300]
        raise PlannerError(f"{where}: onnxruntime cannot load it ({type(exc).__name__}: "
                           f"{reason})") from None
