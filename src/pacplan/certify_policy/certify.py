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
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.certify_policy.policies import ImportedPolicy, load_policy
from pacplan.certify_policy.rollout import NO_WEIGHTS, cost_rows
from pacplan.certify_policy.seeds import DEFAULT_FIRST_SEED, Names, seed_ranges
from pacplan.certify_policy.store import (
    CERTIFICATE,
    CERTIFICATES,
    LOCK,
    certificate_name,
    cost_matrix,
    default_out,
    listed_files,
    matrix_name,
    refuse_output,
    remove_chunks,
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
    labels: list[str] = field(default_factory=list)
    """Each policy as it was given, in the matrices' column order."""

    @property
    def certificate_path(self) -> Path:
        return self.out / CERTIFICATE

    def policy_lines(self) -> list[str]:
        """The posterior by policy (largest weight first), and for 0/1 costs how many of the
        episodes each policy failed, as k/N beside the certified number."""
        from pacplan.io.files import load_npy

        c = self.certificate
        cert = load_npy(c.cert_matrix.path)
        test = load_npy(c.test_matrix.path) if c.test_matrix is not None else None
        binary = bool(np.isin(cert, (0.0, 1.0)).all()
                      and (test is None or np.isin(test, (0.0, 1.0)).all()))
        lines = []
        for j in sorted(range(c.m), key=lambda j: -c.p[j]):
            if c.m > 1 and c.p[j] < 1e-4:
                continue
            weight = f"posterior weight {c.p[j]:.3f}: " if c.m > 1 else ""
            counts = ""
            if binary:
                counts = f", cost 1 in {int(cert[:, j].sum())}/{cert.shape[0]} certification"
                if test is not None:
                    counts += f" and {int(test[:, j].sum())}/{test.shape[0]} test"
                counts += " episodes"
            lines.append(f"{weight}{self.labels[j] if j < len(self.labels) else j}{counts}")
        return lines


def certify_policy(env_id: Any, policies: Sequence[str], *, n: int,
                   out: str | Path | None = None, env_kwargs: Mapping[str, Any] | None = None,
                   first_seed: int = DEFAULT_FIRST_SEED,
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
    `clip_actions`, clipped into it (and the certificate is then for the clipped policy).

    `env_id` is a registered id, 'module:EnvId' (the module registers it and is imported
    first, as `gymnasium.make` does) or a registered `gymnasium.envs.registration.EnvSpec`;
    `env_kwargs` go to `gymnasium.make` (JSON values: they are part of the record)."""
    names = names or Names()
    env_id, env_kwargs = _environment(env_id, env_kwargs, names)
    check_delta(check_real(delta, names.delta))
    for flag, value in (("success_needs_terminated", success_needs_terminated),
                        ("clip_actions", clip_actions), ("progress", progress)):
        _check_flag(value, names.spelling(flag))
    seeds = seed_ranges(n, test_n, first_seed, train_seeds, names)
    if isinstance(policies, str) or not isinstance(policies, Sequence) or not policies:
        raise PacplanError("give one or more policies (a list of SB3 .zip, .onnx or "
                           "'module:callable')")
    try:
        world = _world(env_id, env_kwargs, cost, success_key, success_needs_terminated,
                       return_bounds, reward_bounds, horizon)
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
            if seeds[role] is not None:
                paths[role] = _matrix(out, role, label, seeds, world, env, loaded, inputs,
                                      bool(clip_actions), progress, log)
        remove_chunks(out)
        cert = load_cost_matrix(paths["cert"], name=str(paths["cert"]))
        test = (load_cost_matrix(paths["test"], name=str(paths["test"]))
                if "test" in paths else None)
        from pacplan.certify_policy.provenance import provenance

        certificate = build_certificate(cert, delta, test=test,
                                        provenance=provenance(inputs, loaded, seeds))
        certificate.save(out / CERTIFICATE)
        certificate.save(out / CERTIFICATES / certificate_name(certificate))
    return PolicyCertification(certificate, out, inputs, [p.label for p in loaded])


def _environment(env: Any, env_kwargs: Mapping[str, Any] | None,
                 names: Names) -> tuple[str, dict[str, Any]]:
    """(env id, kwargs) from an id or a registered EnvSpec and the caller's kwargs, checked:
    kwargs must be JSON values with string keys, since they are recorded."""
    import gymnasium as gym

    what = names.spelling("env_id")
    kwargs: dict[str, Any] = {}
    if isinstance(env, gym.envs.registration.EnvSpec):
        registered = gym.registry.get(env.id)
        if registered is None or registered.entry_point != env.entry_point:
            raise PacplanError(f"{what}: the EnvSpec {env.id!r} is not the one registered "
                               "under its id: register it (gymnasium.register) first")
        kwargs = {k: v for k, v in env.kwargs.items() if registered.kwargs.get(k, object()) != v}
        env = env.id
    if not isinstance(env, str) or not env.strip():
        raise PacplanError(f"{what} must be a Gymnasium environment id, 'module:EnvId' or a "
                           f"registered EnvSpec, got {_short(env)}")
    if env_kwargs is not None:
        if not isinstance(env_kwargs, Mapping) or not all(isinstance(k, str)
                                                          for k in env_kwargs):
            raise PacplanError(f"{names.spelling('env_kwargs')} must be a mapping of names to "
                               f"values, got {_short(env_kwargs)}")
        kwargs.update(env_kwargs)
    try:
        json.dumps(kwargs, allow_nan=False)
    except (TypeError, ValueError):
        raise PacplanError(f"{names.spelling('env_kwargs')} {_short(kwargs)}: every value must "
                           "be JSON (numbers, strings, booleans, lists, mappings), as it is "
                           "recorded with the certificate") from None
    return env, kwargs


def _short(value: Any, limit: int = 80) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _world(env_id: str, env_kwargs: dict[str, Any], cost: str, success_key: str | None,
           success_needs_terminated: bool, return_bounds: Sequence[float] | None,
           reward_bounds: Sequence[float] | None, horizon: int | None) -> Any:
    """The `gym` world that declares the environment, its horizon and the cost."""
    from pacplan.worlds.base import make_world

    options: dict[str, Any] = {"env_id": env_id, "cost": cost, "policy": NO_WEIGHTS}
    if env_kwargs:
        options["env_kwargs"] = env_kwargs
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
    from pacplan.io.user_code import user_code_sha256

    rule = {"cost": world.cost, "success_key": world.success_key,
            "success_needs_terminated": world.success_needs_terminated}
    if world.cost == "return":
        rule["return_bounds"] = [world.r_min, world.r_max]
    if ":" in world.cost:  # the function's code is part of what the costs depend on
        rule["cost_source_sha256"] = user_code_sha256(world.cost.partition(":")[0], world.cost)
    inputs: dict[str, Any] = {"env": _env_record(world), "horizon": world.horizon,
                              "cost": rule, "policies": [p.record() for p in loaded],
                              "seeds": {"first": seeds["cert"][0],  # type: ignore[index]
                                        "train": seeds["train"]}}
    if clip_actions:
        inputs["actions"] = "clipped into the action space"
    return inputs


def _env_record(world: Any) -> dict[str, Any]:
    """What the environment is: its id, kwargs and Gymnasium's version, and for an
    environment of the user's (its entry point in a user file) the sha256 of its code."""
    import gymnasium as gym

    from pacplan.io.user_code import user_code_sha256, user_files

    record: dict[str, Any] = {"id": world.env_id, "kwargs": world.env_kwargs,
                              "gymnasium": gym.__version__}
    entry = gym.spec(world.registered_id()).entry_point
    module = (entry.partition(":")[0] if isinstance(entry, str)
              else getattr(entry, "__module__", None))
    if module and user_files(module):
        record["source_sha256"] = user_code_sha256(module, world.env_id)
    return record


def _matrix(out: Path, role: str, label: str, seeds: dict[str, list[int] | None], world: Any,
            env: Any, loaded: list[ImportedPolicy], inputs: dict[str, Any], clip_actions: bool,
            progress: bool, log: Callable[[str], None] | None) -> Path:
    """The cost matrix of `role`'s seeds (`pacplan.certify_policy.store.cost_matrix`), with a
    bar that counts the rows already done."""
    rng, first = seeds[role], seeds["cert"][0]  # type: ignore[index]
    assert rng is not None
    rows, offset = rng[1] - rng[0], rng[0] - first
    n = seeds["cert"][1] - first  # type: ignore[index]
    test_n = rows if role == "test" else 0
    with contextlib.ExitStack() as stack:
        bar: list[Any] = []

        def started(done: int) -> None:
            if done and log is not None:
                log(f"resuming: {done} of {rows} {label} rows already rolled out")
            bar.append(stack.enter_context(progress_bar(progress and done < rows,
                                                        f"{label} rollouts", rows, done)))

        clipped = [0]

        def compute(start: int, stop: int) -> Any:
            return cost_rows(world, env, loaded, range(first + start, first + stop),
                             bar[0].advance, clip_actions, clipped)

        name = matrix_name(role, n, test_n, set(listed_files(out)))
        path = cost_matrix(out, role, name, offset, rows, len(loaded), inputs, compute,
                           started)
    if clipped[0] and log is not None:
        log(f"{clipped[0]} {label} actions were outside the action space and were clipped "
            "into it (clip_actions)")
    return path
