"""A planner of policies certified with `pacplan certify-policy`: one ONNX file per policy of
the posterior's support, each acting under one I/O convention.

The convention is the one `certify-policy` read the policies under
(`pacplan.policy_certification.onnx_file`): the model's first input takes a float32 batch of
flattened observations, (1, obs_dim); its first output is, per observation, n scores (the
action is start + argmax, the first maximum) or one action index (start + its rounded value)
for a `Discrete(n, start)` space, or the action's values for a `Box`, clipped to the box and
cast to its dtype. An SB3 policy was converted at export into a graph of this convention
(`pacplan.export.stable_baselines_onnx`). A non-finite output is refused, never turned into
an action.

Load checks, beyond every file's sha256: planner.json's fields (types, sizes, a distribution
over the support), each model's output size on a zero observation, and the ties to the
evidence that are cheap: the posterior, certified cost and δ are those of
evidence/certificate.json, each policy is the certificate's (its sha256), and a model shipped
as certified is the file whose sha256 the certificate records. Whether the certificate holds,
and whether a converted model is its zip's, is `pacplan verify`'s to say. A model holding
control flow (Loop, Scan, If or any subgraph, read from its protobuf by
`pacplan_runtime.onnx_graph`) is refused before a session is made, as certify-policy refuses
it, and sessions run with graph optimizations off, so loading a model computes nothing of it.
An output that is not a tensor of numbers (strings, a ZipMap's maps) is one PlannerError.
"""

from __future__ import annotations

import hashlib
import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from pacplan_runtime.bundle import PlannerError, parse_json, read_checked
from pacplan_runtime.decide import GymDecision, output_problem, run_net
from pacplan_runtime.onnx_graph import refusal
from pacplan_runtime.spec import GYM_DTYPES, _check_posterior, _Spec

POLICY_PLANNER_FORMAT = "pacplan-policy-planner/1"
EVIDENCE = "evidence"
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MAX_SIZE = 1 << 24


def check_policy_spec(data: dict[str, Any], where: Path) -> dict[str, Any]:
    """planner.json of a policy planner, field by field; one PlannerError naming the field."""
    spec = _Spec(data, where)
    if data.get("format") != POLICY_PLANNER_FORMAT:
        raise spec.fail("format", repr(POLICY_PLANNER_FORMAT))
    cert = spec.get("certificate", str, f"a path in {EVIDENCE}/")
    if not cert.startswith(f"{EVIDENCE}/"):
        raise spec.fail("certificate", f"a path in {EVIDENCE}/")
    spec.number("certified_cost", 0.0, 1.0, "a number in [0, 1]")
    if spec.number("delta", 0.0, 1.0, "a number in (0, 1)") in (0.0, 1.0):
        raise spec.fail("delta", "a number in (0, 1)")
    _check_posterior(spec)
    k = len(data["posterior"]["policy_index"])
    policies = spec.get("policies", list, f"a list of {k} policies, one per support entry")
    if len(policies) != k:
        raise spec.fail("policies", f"a list of {k} policies, one per support entry")
    for i in range(k):
        entry = policies[i]
        if not isinstance(entry, dict) or not isinstance(entry.get("onnx"), str) \
                or not isinstance(entry.get("kind"), str) \
                or not _SHA256.fullmatch(str(entry.get("sha256"))):
            raise spec.fail(f"policies[{i}]", "{onnx: file, kind, sha256 of the certified "
                            "policy, …}")
    horizon = data.get("horizon")
    if horizon is not None and (not isinstance(horizon, int) or isinstance(horizon, bool)
                                or horizon < 1):
        raise spec.fail("horizon", "a whole number of steps ≥ 1 or null")
    if not isinstance(data.get("cost"), dict):
        raise spec.fail("cost", "the cost rule certified (an object)")
    dim = spec.get("observation.dim", int, f"an integer in [1, {_MAX_SIZE}]")
    if not 1 <= dim <= _MAX_SIZE:
        raise spec.fail("observation.dim", f"an integer in [1, {_MAX_SIZE}]")
    kind = spec.get("action.space", str, "'discrete' or 'box'")
    if kind == "discrete":
        if not 1 <= spec.get("action.n", int, "an integer ≥ 1") <= _MAX_SIZE:
            raise spec.fail("action.n", "an integer ≥ 1")
        spec.get("action.start", int, "an integer")
    elif kind == "box":
        shape = spec.array("action.shape", (None,), "a list of sizes ≥ 0", integer=True)
        size = math.prod(shape.tolist())
        if (shape < 0).any() or size > _MAX_SIZE:
            raise spec.fail("action.shape", "a list of sizes ≥ 0")
        low, high = (_bounds(spec, f"action.{end}", size, sign) for end, sign in
                     (("low", -1.0), ("high", 1.0)))
        if (low > high).any():
            raise spec.fail("action.high", "≥ action.low, entry by entry")
        if spec.get("action.dtype", str, "a numpy dtype name") not in GYM_DTYPES:
            raise spec.fail("action.dtype", f"one of {', '.join(GYM_DTYPES)}")
    else:
        raise spec.fail("action.space", "'discrete' or 'box'")
    return data


def _bounds(spec: _Spec, field: str, size: int, sign: float) -> np.ndarray:
    """A box bound: `size` finite numbers, null meaning unbounded (JSON has no infinity)."""
    raw = spec.get(field, list, f"a list of {size} numbers (null: unbounded)")
    ok = len(raw) == size and all(v is None or (isinstance(v, (int, float))
                                                and not isinstance(v, bool)
                                                and math.isfinite(v)) for v in raw)
    if not ok:
        raise spec.fail(field, f"a list of {size} numbers (null: unbounded)")
    return np.array([sign * math.inf if v is None else float(v) for v in raw],
                    dtype=np.float64)


class OnnxPolicies:
    """The support's policies as onnxruntime sessions, acting under the convention above."""

    def __init__(self, root: Path, spec: dict[str, Any], files: dict[str, str],
                 threads: int) -> None:
        self.obs_dim = int(spec["observation"]["dim"])
        action = spec["action"]
        self.discrete = action["space"] == "discrete"
        if self.discrete:
            self.n, self.start = int(action["n"]), int(action["start"])
        else:
            self.shape = tuple(int(v) for v in action["shape"])
            size = math.prod(self.shape)
            self.low = _box(action["low"], -math.inf, size)
            self.high = _box(action["high"], math.inf, size)
            self.dtype = np.dtype(action["dtype"])
        self.sessions: list[Any] = []
        self.inputs: list[str] = []
        for entry in spec["policies"]:
            where = root / entry["onnx"]
            data = read_checked(root, entry["onnx"], files)
            if entry.get("source") is None and hashlib.sha256(data).hexdigest() != \
                    entry["sha256"]:
                raise PlannerError(f"{where}: not the certified policy (its sha256 is not "
                                   "the one planner.json and the certificate record)")
            session = _session(data, threads, where)
            self.sessions.append(session)
            self.inputs.append(session.get_inputs()[0].name)
            self._check_size(len(self.sessions) - 1, where)

    def _run(self, slot: int, x: np.ndarray) -> np.ndarray:
        out = run_net(self.sessions[slot], {self.inputs[slot]: x})
        return np.asarray(out, dtype=np.float64).reshape(-1)

    def _check_size(self, slot: int, where: Path) -> None:
        """The output size on a zero observation (the values may be undefined there)."""
        try:
            raw = self.sessions[slot].run(
                None, {self.inputs[slot]: np.zeros((1, self.obs_dim), np.float32)})[0]
        except Exception as exc:  # onnxruntime's own error types
            reason = " ".join(str(exc).split())[:200]
            raise PlannerError(f"{where}: does not take a float32 batch of {self.obs_dim} "
                               f"observation values ({type(exc).__name__}: {reason})") from None
        problem = output_problem(raw)
        if problem is not None:
            raise PlannerError(f"{where}: {problem}")
        out = np.asarray(raw)
        want = (self.n, 1) if self.discrete else (math.prod(self.shape),)
        if out.size not in want:
            raise PlannerError(f"{where}: gives {out.size} outputs; the action space needs "
                               f"{' or '.join(map(str, want))}")

    def decide(self, slot: int, obs: Any) -> GymDecision:
        """Policy `slot`'s action on one flattened observation (obs_dim,)."""
        try:
            arr = np.asarray(obs)
        except (ValueError, TypeError) as exc:
            raise PlannerError(f"observation: not an array ({exc})") from None
        if arr.shape != (self.obs_dim,) or arr.dtype.kind not in "fiub":
            raise PlannerError(f"observation must be the flattened numeric ({self.obs_dim},) "
                               "array (np.ravel of a Box observation, gymnasium.spaces.flatten "
                               f"of any other), got {arr.dtype} {arr.shape}")
        if not np.isfinite(arr.astype(np.float64)).all():
            raise PlannerError("observation holds NaN or infinity")
        z = self._run(slot, arr.astype(np.float32).reshape(1, -1))
        if self.discrete:
            if z.size == self.n:
                return GymDecision(np.int64(self.start + int(np.argmax(z))), z)
            index = round(float(z[0]))
            if not 0 <= index < self.n:
                raise PlannerError(f"the policy gave action index {z[0]!r}, outside "
                                   f"0 … {self.n - 1}; no action is taken from it")
            return GymDecision(np.int64(self.start + index), z)
        action = np.clip(z.reshape(self.shape), self.low.reshape(self.shape),
                         self.high.reshape(self.shape))
        return GymDecision(action.astype(self.dtype), z)


def _box(values: list[Any], unbounded: float, size: int) -> np.ndarray:
    return np.array([unbounded if v is None else float(v) for v in values],
                    dtype=np.float64).reshape(size)


def _session(data: bytes, threads: int, where: Path) -> Any:
    """An onnxruntime session with graph optimizations off: nothing of the model is computed
    while it loads (constant folding would); control flow (Loop, Scan, If, a subgraph) is
    refused from the protobuf first, as `pacplan certify-policy` refuses it (a tampered
    planner's endless Loop made this load hang)."""
    import onnxruntime as ort

    refused = refusal(data)
    if refused is not None:
        raise PlannerError(f"{where}: {refused}")

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime's own error types: one line naming the file
        reason = " ".join(str(exc).split())[:300]
        raise PlannerError(f"{where}: onnxruntime cannot load it ({type(exc).__name__}: "
                           f"{reason})") from None


def check_policy_evidence(root: Path, spec: dict[str, Any], files: dict[str, str]) -> None:
    """The cheap ties to evidence/certificate.json: the posterior, certified cost and δ are
    its, and each support policy is the certificate's (by sha256)."""
    where, cert_rel = root / "planner.json", spec["certificate"]
    cert = parse_json(read_checked(root, cert_rel, files), root / cert_rel)
    p = cert.get("p")
    if not isinstance(p, list) or not all(isinstance(v, (int, float))
                                          and not isinstance(v, bool) for v in p):
        raise PlannerError(f"{root / cert_rel}: field p is not a list of numbers")
    support = [i for i, v in enumerate(p) if v > 0.0]
    posterior = spec["posterior"]
    if posterior["policy_index"] != support or \
            posterior["probability"] != [p[i] for i in support]:
        raise PlannerError(f"{where}: posterior differs from the certificate's p (the support "
                           f"and probabilities of {cert_rel})")
    if spec["certified_cost"] != cert.get("certified") or spec["delta"] != cert.get("delta"):
        raise PlannerError(f"{where}: certified_cost or delta is not the certificate's")
    record = (cert.get("provenance") or {}).get("certify_policy")
    certified = record.get("policies") if isinstance(record, dict) else None
    if not isinstance(certified, list) or len(certified) != len(p):
        raise PlannerError(f"{root / cert_rel}: not a certify-policy certificate (no "
                           "provenance.certify_policy.policies, one per column of p)")
    for k, j in enumerate(support):
        if not isinstance(certified[j], dict) or \
                certified[j].get("sha256") != spec["policies"][k]["sha256"]:
            raise PlannerError(f"{where}: policies[{k}] is not the certificate's policy {j} "
                               "(its sha256 differs)")
