"""Certify policies trained elsewhere: roll them out on fresh seeds, store the cost matrix, and
certify it as `certify-matrix` would.

With one policy the matrix is N × 1 and the certificate is the kl-inverse bound with KL = 0: a
plain test-set bound on that policy's expected cost. With several (checkpoints, training
seeds), the posterior over them with the uniform prior is the bound-optimal Gibbs posterior
(`pacplan.pacbayes.posterior`), and the certificate holds for a policy drawn from it per
episode. Either way the policies must not depend on the certification seeds: seeds that
overlap the declared training seeds are refused before any work.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.certify_policy.policies import ImportedPolicy, load_policy
from pacplan.certify_policy.rollout import NO_WEIGHTS, cost_rows
from pacplan.certify_policy.seeds import DEFAULT_FIRST_SEED, Names, seed_ranges
from pacplan.certify_policy.store import (
    CERTIFICATE,
    LOCK,
    cost_matrix,
    default_out,
    refuse_output,
    removed_if_refused,
    stamp,
)
from pacplan.errors import PacplanError
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.pacbayes.record import Certificate
from pacplan.run.progress import progress_bar
from pacplan.validation import check_delta, check_real


@dataclass
class PolicyCertification:
    """A finished certify-policy command: its certificate, folder and what it certified."""

    certificate: Certificate
    out: Path
    inputs: dict[str, Any] = field(default_factory=dict)

    @property
    def certificate_path(self) -> Path:
        return self.out / CERTIFICATE


def certify_policy(env_id: str, policies: Sequence[str], *, n: int,
                   out: str | Path | None = None, first_seed: int = DEFAULT_FIRST_SEED,
                   test_n: int = 0, cost: str = "return", success_key: str | None = None,
                   success_needs_terminated: bool = False,
                   return_bounds: Sequence[float] | None = None,
                   reward_bounds: Sequence[float] | None = None, horizon: int | None = None,
                   delta: float = 0.01, train_seeds: Sequence[int] | None = None,
                   clip_actions: bool = False, progress: bool = False,
                   log: Callable[[str], None] | None = None,
                   names: Names | None = None) -> PolicyCertification:
    """Roll `policies` (SB3 .zip, .onnx or 'module:callable') out on environment `env_id` for
    n certification seeds (and test_n test seeds after them) and certify the cost matrix;
    everything is checked before the first rollout. Resumes a killed command's `out`
    (default runs/certify-<env_id>). An action outside a Box action space is refused, or, with
    `clip_actions`, clipped into it (and the certificate is then for the clipped policy)."""
    names = names or Names()
    check_delta(check_real(delta, names.delta))
    for flag, value in (("success_needs_terminated", success_needs_terminated),
                        ("clip_actions", clip_actions), ("progress", progress)):
        _check_flag(value, names.spelling(flag))
    if not isinstance(env_id, str) or not env_id:
        raise PacplanError(f"{names.spelling('env_id')} must be a Gymnasium environment id "
                           f"(a string), got {env_id!r}")
    seeds = seed_ranges(n, test_n, first_seed, train_seeds, names)
    if isinstance(policies, str) or not isinstance(policies, Sequence) or not policies:
        raise PacplanError("give one or more policies (a list of SB3 .zip, .onnx or "
                           "'module:callable')")
    try:
        world = _world(env_id, cost, success_key, success_needs_terminated, return_bounds,
                       reward_bounds, horizon)
    except PacplanError as exc:
        raise PacplanError(names.reword(str(exc))) from None
    env = world.make_env()
    loaded = [load_policy(str(p), env.observation_space, env.action_space) for p in policies]
    _refuse_duplicates(loaded)
    inputs = _inputs(world, loaded, seeds, bool(clip_actions))
    out = Path(out) if out is not None else default_out(env_id)
    refuse_output(out, {f"POLICY {p}": p for p in policies if Path(str(p)).exists()}, names.out)
    from pacplan.run.lock import hold

    with removed_if_refused(out), hold(out, out / LOCK):
        stamp(out, inputs, names.out, {"policy_files": [p.label for p in loaded]})
        paths = {}
        for role, label in (("cert", "certification"), ("test", "test")):
            rng = seeds[role]
            if rng is None:
                continue
            paths[role] = _matrix(out, role, label, rng, world, env, loaded, inputs,
                                  bool(clip_actions), progress, log)
        cert = load_cost_matrix(paths["cert"], name=str(paths["cert"]))
        test = (load_cost_matrix(paths["test"], name=str(paths["test"]))
                if "test" in paths else None)
        certificate = build_certificate(cert, delta, test=test)
        certificate.save(out / CERTIFICATE)
    return PolicyCertification(certificate, out, inputs)


def _world(env_id: str, cost: str, success_key: str | None, success_needs_terminated: bool,
           return_bounds: Sequence[float] | None, reward_bounds: Sequence[float] | None,
           horizon: int | None) -> Any:
    """The `gym` world that declares the environment, its horizon and the cost."""
    from pacplan.worlds.base import make_world

    options: dict[str, Any] = {"env_id": env_id, "cost": cost, "policy": NO_WEIGHTS}
    given = {"success_key": success_key, "return_bounds": return_bounds,
             "reward_bounds": reward_bounds, "horizon": horizon}
    options.update({k: (list(v) if isinstance(v, tuple) else v) for k, v in given.items()
                    if v is not None})
    if success_needs_terminated:
        options["success_needs_terminated"] = True
    return make_world("gym", **options)


def _check_flag(value: object, name: str) -> None:
    """True or False only: "no" is a string, not False."""
    if not isinstance(value, bool | np.bool_):
        raise PacplanError(f"{name} must be True or False, got {value!r}")


def _refuse_duplicates(loaded: list[ImportedPolicy]) -> None:
    seen: dict[str, str] = {}
    for p in loaded:
        if p.sha256 in seen:
            raise PacplanError(f"policies {seen[p.sha256]} and {p.label} are the same policy "
                               f"(sha256 {p.sha256[:12]}…): give each once")
        seen[p.sha256] = p.label


def _inputs(world: Any, loaded: list[ImportedPolicy], seeds: dict[str, list[int] | None],
            clip_actions: bool) -> dict[str, Any]:
    """Everything the cost matrices depend on (the stamp's identity): user code (a cost
    function, an environment of the user's) by the sha256 of every user file it imports."""
    from pacplan.io.user_code import user_code_sha256, user_files

    rule = {"cost": world.cost, "success_key": world.success_key,
            "success_needs_terminated": world.success_needs_terminated}
    if world.cost == "return":
        rule["return_bounds"] = [world.r_min, world.r_max]
    if ":" in world.cost:  # the function's code is part of what the costs depend on
        rule["cost_source_sha256"] = user_code_sha256(world.cost.partition(":")[0], world.cost)
    inputs: dict[str, Any] = {"env_id": world.env_id, "horizon": world.horizon, "cost": rule,
                              "policies": [p.record() for p in loaded], "seeds": seeds}
    env_module = _entry_module(world.env_id)
    if env_module is not None and user_files(env_module):  # an environment of the user's
        inputs["env_source_sha256"] = user_code_sha256(env_module, world.env_id)
    if clip_actions:
        inputs["actions"] = "clipped into the action space"
    return inputs


def _entry_module(env_id: str) -> str | None:
    """The module that defines a registered environment (its entry point's)."""
    import gymnasium as gym

    try:
        entry = gym.spec(env_id).entry_point
    except gym.error.Error:
        return None
    if isinstance(entry, str):
        return entry.partition(":")[0] or None
    return getattr(entry, "__module__", None)


def _matrix(out: Path, role: str, label: str, rng: list[int], world: Any, env: Any,
            loaded: list[ImportedPolicy], inputs: dict[str, Any], clip_actions: bool,
            progress: bool, log: Callable[[str], None] | None) -> Path:
    """costs/<role>.npy for the seeds `rng`, with a bar that counts the rows already done."""
    rows = rng[1] - rng[0]
    with contextlib.ExitStack() as stack:
        bar: list[Any] = []

        def started(done: int) -> None:
            if done and log is not None:
                log(f"resuming: {done} of {rows} {label} rows already rolled out")
            bar.append(stack.enter_context(progress_bar(progress and done < rows,
                                                        f"{label} rollouts", rows, done)))

        clipped = [0]

        def compute(start: int, stop: int) -> Any:
            return cost_rows(world, env, loaded, range(rng[0] + start, rng[0] + stop),
                             bar[0].advance, clip_actions, clipped)

        path = cost_matrix(out, role, rows, len(loaded), inputs, compute, started)
    if clipped[0] and log is not None:
        log(f"{clipped[0]} {label} actions were outside the action space and were clipped "
            "into it (clip_actions)")
    return path
