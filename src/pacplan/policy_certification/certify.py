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
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.user_code import recording_user_files
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.execution.progress import progress_bar
from pacplan.policy_certification.inputs import (
    identify,
    load_policies,
    make_world_for,
    refuse_unidentified_resume,
    unidentified,
)
from pacplan.policy_certification.names import PYTHON, Names
from pacplan.policy_certification.policies import ImportedPolicy
from pacplan.policy_certification.request import CertifyRequest, CostOptions
from pacplan.policy_certification.rollout import cost_rows
from pacplan.policy_certification.seeds import DEFAULT_FIRST_SEED, DEFAULT_N
from pacplan.policy_certification.store import (
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


def certify_policy(env_id: Any, policies: Sequence[Any], *, n: int = DEFAULT_N,
                   out: str | Path | None = None, env_kwargs: Mapping[str, Any] | None = None,
                   first_seed: int = DEFAULT_FIRST_SEED,
                   test_n: int = 0, cost: Any = "return", success_key: str | None = None,
                   success_needs_terminated: bool = False,
                   return_bounds: Sequence[float] | None = None,
                   reward_bounds: Sequence[float] | None = None, horizon: int | None = None,
                   delta: float = 0.01, train_seeds: Sequence[int] | None = None,
                   clip_actions: bool = False, obs_normalization: str | Path | None = None,
                   workers: int = 1, executor: str = "serial",
                   progress: bool = False,
                   log: Callable[[str], None] | None = None,
                   names: Names | None = None) -> PolicyCertification:
    """Roll `policies` out on environment `env_id` for n certification seeds (and test_n test
    seeds after them) and certify the cost matrix; everything is checked before the first
    rollout. Resumes a killed command's `out` (default runs/certify-<env_id>), and a larger or
    smaller n or test_n reuses every row already rolled out.

    Args:
        env_id: a registered Gymnasium id, 'module:EnvId' (the module registers it and is
            imported first, as `gymnasium.make` does), a registered `EnvSpec`, or a Python
            environment (a `gymnasium.Env`, or a function or class returning one).
        policies: each a path of a Stable-Baselines3 .zip or an .onnx file, 'module:callable',
            or a Python object: a function obs -> action, a torch module, an SB3 model (with
            its VecNormalize statistics, if any) or an onnxruntime session made from a file.
            Several give a posterior over them.
        n: certification seeds.
        cost: "return" (with return_bounds or reward_bounds), "terminated", "success" (with
            success_key, success_needs_terminated), 'module:function' or a function of the
            episode record (`pacplan.worlds.from_gym.costs.Episode`) returning a number in [0, 1].
        env_kwargs: keyword arguments for `gymnasium.make` (JSON values: they are recorded).
        clip_actions: clip an action outside a Box action space into it (the certificate is
            then for the clipped policy) instead of refusing it.
        obs_normalization: an .npz of Stable-Baselines3 VecNormalize statistics (mean, var,
            clip_obs, epsilon: docs/certify-policy.md shows the conversion), applied to every
            observation before the policies see it.
        workers: roll out in this many processes; the costs are those of one process, bit
            for bit. Only inputs given by name or path travel to other processes.
        executor: "serial" (with workers > 1: "processes"), "processes" or "ray".
        delta: the certificate holds with probability at least 1 − delta.
        first_seed: the first certification seed.
        test_n: test seeds after the certification seeds (a test estimate).
        train_seeds: [start, stop) the policies were trained on; overlapping seeds are refused.
        horizon: the most steps per episode (default: the environment's limit).
        names: how messages spell each argument (`pacplan.policy_certification.names.PYTHON`, the
            default, or `CLI`, the command's flags).

    Python objects are identified by their code's files and weights where they can be; a
    lambda, closure, callable object or environment instance cannot be (its state is in no
    file): the certificate says so and the folder cannot be resumed
    (`pacplan.policy_certification.live`)."""
    request = CertifyRequest(
        env_id, policies, n=n, test_n=test_n, first_seed=first_seed, train_seeds=train_seeds,
        out=out, env_kwargs=env_kwargs, delta=delta, workers=workers, executor=executor,
        progress=progress, log=log, names=PYTHON if names is None else names,
        costs=CostOptions(cost=cost, success_key=success_key,
                          success_needs_terminated=success_needs_terminated,
                          return_bounds=return_bounds, reward_bounds=reward_bounds,
                          horizon=horizon, clip_actions=clip_actions,
                          obs_normalization=obs_normalization))
    return certify(request)


def certify(request: CertifyRequest) -> PolicyCertification:
    """Carry out a checked request (`certify_policy` builds one from Python's arguments, the
    command from its flags): everything is identified and checked before the first rollout."""
    r, names, costs = request, request.names, request.costs
    with recording_user_files() as code:  # every user file the identity below hashes
        world, environment, cost_id = make_world_for(r.env_id, r.env_kwargs, costs, names)
        env = world.make_env()
        loaded = load_policies(r.policies, env.observation_space, env.action_space,
                               names.obs_normalization)
        norm = None
        if costs.obs_normalization is not None:
            from pacplan.policy_certification.normalization import (
                normalized,
                read_obs_normalization,
            )

            norm = read_obs_normalization(costs.obs_normalization, env.observation_space,
                                          names.obs_normalization)
            loaded = normalized(loaded, norm)
        inputs = identify(world, environment, cost_id, loaded, r.seeds, bool(costs.clip_actions))
    if norm is not None:
        inputs["obs_normalization"] = norm.record()
    out = r.out if r.out is not None else default_out(world.env_id)
    refuse_unidentified_resume(out, inputs, names.out)
    _say_unidentified(inputs, r.log)
    given = {f"POLICY {p}": p for p in r.policies
             if isinstance(p, str | os.PathLike) and Path(p).exists()}
    if costs.obs_normalization is not None:
        given[names.obs_normalization] = costs.obs_normalization
    refuse_output(out, given, names.out)
    from pacplan.pipeline.lock import hold

    pool, spec = _parallel(r, environment, loaded,
                           None if norm is None else [str(Path(norm.path).resolve()),
                                                      norm.sha256])
    rollouts = _Rollouts(world, env, loaded, bool(costs.clip_actions), pool, spec)
    with removed_if_refused(out), hold(out, out / LOCK, names.out), \
            contextlib.ExitStack() as stack:
        if pool is not None:
            stack.callback(pool.close)
        stamp(out, inputs, names.out, {"policy_files": [p.label for p in loaded]})
        paths = {}
        for role, label in (("cert", "certification"), ("test", "test")):
            if r.seeds[role] is not None:
                paths[role] = _matrix(out, role, label, r, rollouts, inputs)
        cert = load_cost_matrix(paths["cert"], name=str(paths["cert"]))
        test = (load_cost_matrix(paths["test"], name=str(paths["test"]))
                if "test" in paths else None)
        from pacplan.policy_certification.provenance import provenance

        certificate = build_certificate(cert, r.delta, test=test,
                                        provenance=provenance(
                                            inputs, loaded, r.seeds, out, code,
                                            None if norm is None else (norm.path, norm.sha256)))
        certificate.save(out / CERTIFICATE)
        certificate.save(out / CERTIFICATES / certificate_name(certificate))
        remove_chunks(out)  # only now: until a certificate vouches for a matrix, its chunks
        # are what a resume takes its rows from (`store._vouched`)
    return PolicyCertification(certificate, out, inputs, [p.label for p in loaded])


def _say_unidentified(inputs: dict[str, Any], log: Callable[[str], None] | None) -> None:
    """Say which inputs are objects the certificate cannot be re-verified from files for."""
    which = unidentified(inputs)
    if not which:
        return
    message = (f"{', '.join(which)}: Python objects whose state is in no file (a lambda, a "
               "closure, a callable object or an environment instance): the certificate says "
               "so, cannot be re-verified from files, and this folder cannot be resumed")
    if log is not None:
        log(message)
    else:  # Python: a warning the caller can filter (the command prints the line instead),
        import warnings  # shown at the line that called certify_policy

        from pacplan.errors import UnidentifiedInputWarning

        warnings.warn(message, UnidentifiedInputWarning, stacklevel=4)


@dataclass
class _Rollouts:
    """Where rows are rolled out: in this process (`world`, `env`, `loaded`), or by an
    executor's workers on the `policy-rollouts` world (`spec`), with the same costs."""

    world: Any
    env: Any
    loaded: list[ImportedPolicy]
    clip_actions: bool
    executor: Any = None
    spec: Any = None
    clipped: list[int] = field(default_factory=lambda: [0])

    def rows(self, first: int, ranges: list[tuple[int, int]],
             advance: Callable[[], None]) -> Iterator[tuple[int, np.ndarray]]:
        """(index, costs of seeds first + a … first + b − 1) for each (a, b) in `ranges`."""
        if self.spec is None:
            for i, (a, b) in enumerate(ranges):
                yield i, cost_rows(self.world, self.env, self.loaded, range(first + a, first + b),
                                   advance, self.clip_actions, self.clipped)
            return
        thetas = np.arange(len(self.loaded), dtype=np.float32).reshape(-1, 1)
        blocks = [(np.arange(first + a, first + b, dtype=np.int64), thetas) for a, b in ranges]
        for i, block in self.executor.run_blocks(self.spec, blocks):
            for _ in range(len(block)):
                advance()
            yield i, block


def _parallel(request: CertifyRequest, environment: Any, loaded: list[ImportedPolicy],
              normalization: list[str] | None) -> tuple[Any, Any]:
    """(executor, world spec) for the request's executor and workers, or (None, None) for
    this process; `normalization` is the statistics' (path, sha256) a worker checks."""
    if request.in_this_process:
        return None, None
    from pacplan.pipeline.execution.executors import make_executor
    from pacplan.pipeline.execution.tasks import WorldSpec
    from pacplan.policy_certification.world import NAME, world_options

    names = request.names
    specs = [str(Path(p).resolve()) if isinstance(p, str | os.PathLike) and Path(p).is_file()
             else p for p in request.policies]
    opts = world_options(specs, [p.sha256 for p in loaded],
                         environment.env_id if environment.factory is None else None,
                         environment.kwargs, request.costs, normalization)
    if opts is None:
        raise PacplanError(f"{names.workers} > 1 and {names.executor} processes or ray roll "
                           "out in other processes, where Python objects cannot go: give the "
                           "environment, policies and cost by name or path, or roll out in "
                           "this process")
    kind = "processes" if request.executor == "serial" else request.executor
    return make_executor(kind, request.workers), WorldSpec(NAME, opts)


def _matrix(out: Path, role: str, label: str, request: CertifyRequest, rollouts: _Rollouts,
            inputs: dict[str, Any]) -> Path:
    """The cost matrix of `role`'s seeds (`pacplan.policy_certification.store.cost_matrix`), with a
    bar that counts the rows already done."""
    seeds, progress, log = request.seeds, request.progress, request.log
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

        def compute(ranges: list[tuple[int, int]]) -> Iterator[tuple[int, np.ndarray]]:
            return rollouts.rows(first, ranges, bar[0].advance)

        rollouts.clipped[0] = 0
        name = matrix_name(role, n, test_n, set(listed_files(out)))
        path = cost_matrix(out, role, name, offset, rows, len(rollouts.loaded), inputs,
                           compute, started)
    if rollouts.clipped[0] and log is not None:
        log(f"{rollouts.clipped[0]} {label} actions were outside the action space and were "
            "clipped into it (clip_actions)")
    return path
