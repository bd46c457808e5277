"""`run`: every stage of a config in one run directory, resumable at any point.

The directory is frozen to its config: a rerun with a config of another identity is refused
(where the work runs and where input files live do not count; input files count by content,
checked where they are used).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import (
    RunConfig,
    config_to_dict,
    dump_config,
    files_read_from,
    parse_config,
)
from pacplan.errors import PacplanError
from pacplan.es.strata import plan_strata
from pacplan.io.files import load_npy, remove_stale_temps, sha256_bytes
from pacplan.io.weights import load_theta
from pacplan.io.yamlio import read_yaml
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.execution.executors import Executor, WorkersLost, executor_from_config
from pacplan.pipeline.prior.prior_world import adopt_prior_options, prior_source
from pacplan.pipeline.prior.training import read_start_files
from pacplan.pipeline.rundir import Manifest, RunDir, identity
from pacplan.pipeline.stages import (
    certify,
    ensure_costs,
    ensure_policies,
    ensure_prior,
    ensure_screened,
    screen_columns,
    world_spec,
)
from pacplan.validation import count
from pacplan.worlds.base import (
    check_world_options,
    make_world,
    noted,
    policy_note,
    warmup_note,
)


@dataclass
class RunResult:
    """What `run` produced: the certificates by N and the wall time of each step."""

    run_dir: Path
    certificates: dict[int, Certificate]
    seconds: dict[str, float] = field(default_factory=dict)


def config_identity(cfg: RunConfig) -> dict[str, Any]:
    """A config as a dict minus what never changes a result: where the work runs (executor)
    and where input files live. Their contents are checked where they are used: the prior by
    its sha256 in the manifest, a baseline's weights in its matrix's inputs, an ES starting
    mean or variance by the ES fingerprint. So a run directory stays resumable from another
    checkout."""
    blank = cfg.model_copy(deep=True)
    for section, name in blank.input_files():
        setattr(section, name, "<file>")
    d = config_to_dict(blank)
    d.pop("executor", None)
    d.pop("prior", None)
    return d


def freeze_config(cfg: RunConfig, rd: RunDir, prior_file: str | Path | None = None) -> None:
    """Write config.yaml, or refuse if the directory was made by a different config. A given
    prior file (`--prior`) is what the frozen `prior:` names, not the config's own. A frozen
    config that says the same, naming the same files (read from the run's folder), is left as
    written, so resuming a shipped result keeps its relative paths."""
    path = rd / RunDir.CONFIG
    if prior_file is not None:
        cfg = cfg.model_copy(update={"prior": str(Path(prior_file).resolve())})
    if path.is_file():
        frozen = files_read_from(_frozen_config(path, rd.option), rd.path)
        old = config_identity(frozen)
        new = config_identity(cfg)
        if identity(old) != identity(new):
            changed = sorted(k for k in set(old) | set(new)
                             if identity(old.get(k)) != identity(new.get(k)))
            raise PacplanError(f"{rd.path} was made by a different config (changed: "
                               f"{', '.join(changed)}, says its {RunDir.CONFIG}); use a new "
                               f"{rd.option} directory")
        if config_to_dict(_resolved(frozen)) == config_to_dict(_resolved(cfg)):
            return  # the same config and files: its text stays (a shipped result's relative paths)
    dump_config(cfg, path)


def _resolved(cfg: RunConfig) -> RunConfig:
    """A copy of `cfg` naming each input file by the absolute path it reads."""
    copy = cfg.model_copy(deep=True)
    for section, name in copy.input_files():
        setattr(section, name, str(Path(getattr(section, name)).resolve()))
    return copy


def _frozen_config(path: Path, option: str) -> RunConfig:
    """A run directory's config.yaml, read and validated; damage is named, never a traceback
    (advising a new folder by its `option`, as the caller spells it)."""
    restore = f"; restore it, or use a new {option} directory"
    try:
        data = read_yaml(path)
    except PacplanError as exc:
        raise PacplanError(f"damaged frozen config: {exc}{restore}") from None
    if not isinstance(data, dict):
        raise PacplanError(f"{path}: damaged frozen config (a YAML {type(data).__name__}, not a "
                           "mapping of fields)" + restore)
    try:
        return parse_config(data, source=str(path))
    except PacplanError as exc:
        raise PacplanError(f"{exc}{restore}") from None


def _seed_array(seed_range: tuple[int, int] | list[int], count: int | None = None) -> np.ndarray:
    start, stop = int(seed_range[0]), int(seed_range[1])
    if count is not None:
        stop = start + count
    return np.arange(start, stop, dtype=np.int64)


def _baselines(cfg: RunConfig, rd: RunDir, manifest: Manifest, ex: Executor, dim: int,
               test_seeds: np.ndarray, step: Callable[[str, Callable[[], Any]], Any],
               progress: bool, counter: Callable[[str], Callable[[int], None]]) -> None:
    """One test-cost column per baseline: its world options and all-zero or given weights."""
    for base in cfg.baselines:
        spec = world_spec(cfg, **base.world_options)
        seeds = test_seeds if base.envs is None else test_seeds[: base.envs]
        inputs: dict[str, Any] = {"world": {"name": spec.name, "options": spec.options},
                                  "seeds": list(cfg.seeds.test) if base.envs is None
                                  else [int(seeds[0]), int(seeds[-1]) + 1]}
        if base.weights is None:
            fixed = np.zeros((1, dim), dtype=np.float32)
        else:  # the file's content is an input, not its path
            fixed = load_theta(base.weights, dim, cfg.world.name)[None, :]
            inputs["weights_sha256"] = sha256_bytes(fixed.tobytes())
        name = f"baseline {base.name}"
        step(name, lambda base=base, spec=spec, inputs=inputs, fixed=fixed, name=name,
             seeds=seeds: ensure_costs(f"baseline-{base.name}", spec, fixed, seeds, rd,
                                       manifest, ex, inputs, progress,
                                       cfg.storage.cost_denominator, computed=counter(name)))


def cost_inputs(policies_sha: str, world: dict[str, Any], seeds: np.ndarray,
                columns: list[int] | None = None) -> dict[str, Any]:
    """What a policy cost matrix is computed from, as its manifest entry and its chunk folder's
    stamp record it: the policies (sha256), the world (name and options), the seed range, and
    for a screened run's kept policies their `columns`."""
    inputs = {"policies": policies_sha, "world": world,
              "seeds": [int(seeds[0]), int(seeds[-1]) + 1]}
    return inputs if columns is None else inputs | {"columns": columns}


def _worlds_key(cfg: RunConfig) -> str:
    """The worlds and options a run builds, as one string (what `check_worlds` vouches for)."""
    return json.dumps([cfg.world.name, cfg.world.options,
                       [b.world_options for b in cfg.baselines]], sort_keys=True, default=str)


def check_worlds(cfg: RunConfig) -> None:
    """Every world the run will build, with its options checked, the teacher's request and
    every file the config names (`check_files`): baselines are flown last and ES starts after
    distillation, so a bad option or file is named before any work, not after hours of it. The
    boundary (`pacplan run`, `pacplan train-prior`, `pacplan.run`) calls it once; the config
    then records what was checked, and `run` trusts it unless the worlds or options were
    changed since."""
    check_world_options(cfg.world.name, cfg.world.options)
    for base in cfg.baselines:
        try:
            check_world_options(cfg.world.name, cfg.world.options | base.world_options)
        except PacplanError as exc:
            raise PacplanError(f"baseline {base.name!r}: {exc}") from None
    if cfg.distill is not None:
        from pacplan.pipeline.prior.distill import check_request

        check_request(cfg)
    check_files(cfg)
    cfg._worlds_checked = _worlds_key(cfg)


def check_files(cfg: RunConfig) -> None:
    """Read and check every weights file the config names (es.init_mean, es.init_var and each
    baseline's weights) against the policy's size; the world is built only when one is named.
    A given prior is checked by the first stage, before any other runs (`ensure_prior`). So
    are es.strata against the world's strata and the prior seeds (`plan_strata`)."""
    bases = [b for b in cfg.baselines if b.weights is not None]
    starts = any(isinstance(v, str) for v in (cfg.es.init_mean, cfg.es.init_var))
    if not bases and not starts and cfg.es.strata is None:
        return
    world = make_world(cfg.world.name, **cfg.world.options)
    dim, note = int(world.policy_dim()), policy_note(world)
    read_start_files(cfg.es, dim, note)
    if cfg.es.strata is not None:
        plan_strata(cfg.es.strata, cfg.es.envs_per_iter, world, tuple(cfg.seeds.prior))
    for base in bases:
        assert base.weights is not None
        try:
            load_theta(base.weights, dim, cfg.world.name)
        except PacplanError as exc:
            raise noted(PacplanError(f"baseline {base.name!r} weights: {exc}"), note) from None


def started_key(run_dir: str | Path, prior_file: str | Path | None) -> tuple[str, str | None]:
    """What `pacplan.pipeline.start.start_run` prepared a config for (`cfg._started`): `run`
    adopts nothing again for it."""
    return str(Path(run_dir)), None if prior_file is None else str(Path(prior_file))


def run(cfg: RunConfig, run_dir: str | Path, prior_file: str | Path | None = None,
        progress: bool = True, executor: Executor | None = None,
        log: Callable[[str], None] | None = None, option: str = "--out") -> RunResult:
    """Run (or resume) every step of `cfg` in `run_dir`, holding the directory's lock (another
    process working there is refused at once, naming it). A config whose worlds the boundary
    checked (`check_worlds`) is trusted; any other is checked here first. A prior file that
    records its policy family sets the world options the config leaves unset
    (`adopt_prior_options`), unless `pacplan.pipeline.start.start_run` has done so already.
    Messages name the run directory by `option`, as the caller spells it."""
    if cfg._started != started_key(run_dir, prior_file):
        adopted = adopt_prior_options(cfg, prior_source(cfg, prior_file, run_dir))
        if adopted and log:
            log(adopted)
    if cfg._worlds_checked != _worlds_key(cfg):
        check_worlds(cfg)
    rd = RunDir(run_dir, option)
    with rd.locked():
        return _run(cfg, rd, prior_file, progress, executor, log)


def _run(cfg: RunConfig, rd: RunDir, prior_file: str | Path | None, progress: bool,
         executor: Executor | None, log: Callable[[str], None] | None) -> RunResult:
    freeze_config(cfg, rd, prior_file)
    manifest = Manifest(rd.path, rd.option)
    say = log or (lambda _msg: None)
    litter = remove_stale_temps(rd.path)  # safe: we hold the lock, their writers are gone
    if litter:
        say(f"removed {count(len(litter), 'temporary file')} left by killed writes "
            f"({', '.join(str(p.relative_to(rd.path)) for p in litter[:3])}"
            f"{', …' if len(litter) > 3 else ''})")
    own = executor is None
    ex = executor_from_config(cfg.executor) if own else executor
    seconds: dict[str, float] = {}
    rollouts: dict[str, int] = {}  # computed here, per cost step (kept chunks are not counted)
    cpu: dict[str, float] = {}  # the CPU seconds those rollouts took where they ran

    def counter(name: str) -> Callable[[int, float], None]:
        rollouts[name] = 0
        cpu[name] = 0.0

        def add(k: int, cpu_s: float) -> None:
            rollouts[name] += k
            cpu[name] += cpu_s

        return add

    def step(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        try:
            result = fn()
        finally:  # an interrupted step's time is kept too (with what it computed)
            seconds[name] = round(time.perf_counter() - t0, 3)
        say(f"{name}: {seconds[name]:.1f} s")
        return result

    note = warmup_note(cfg.world.name, dict(cfg.world.options))
    if note and not all((rd / RunDir.costs(role, cfg.storage.cost_denominator is not None))
                        .is_file() for role in ("cert", "test")):
        say(note)
    try:
        prior_sha = step("prior", lambda: ensure_prior(cfg, rd, manifest, ex, prior_file,
                                                      progress, say))
        policies_sha = step("policies", lambda: ensure_policies(cfg, rd, manifest, prior_sha))
        thetas = load_npy(rd / RunDir.POLICIES)
        spec = world_spec(cfg)
        world = config_to_dict(cfg)["world"]
        n_cert = max(cfg.certificate.n or [1])
        screen = cfg.certificate.screen
        seeds = _seed_array(cfg.seeds.cert, n_cert)
        matrices: dict[str, np.ndarray] = {}
        columns: list[int] | None = None
        policies = thetas

        def costs(role: str, role_seeds: np.ndarray) -> None:
            inputs = cost_inputs(policies_sha, world, role_seeds, columns)
            matrices[role] = step(f"{role} costs", lambda: ensure_costs(
                role, spec, policies, role_seeds, rd, manifest, ex, inputs, progress,
                cfg.storage.cost_denominator, log=say, computed=counter(f"{role} costs")))

        costs("cert", seeds[: screen.rows] if screen else seeds)  # every policy
        if screen is not None:  # the rest of the rows and the test set: kept policies only
            columns = screen_columns(matrices["cert"], screen.keep)
            say(f"screened: policies {columns} kept (least cost on the first "
                f"{screen.rows} certification rows)")
            policies = thetas[columns]
            if n_cert > screen.rows:
                costs("cert-rest", seeds[screen.rows:])
            matrices["cert"] = ensure_screened(
                rd, manifest, matrices["cert"], matrices.get("cert-rest"), columns,
                cost_inputs(policies_sha, world, seeds, columns), cfg.storage.cost_denominator)
        costs("test", _seed_array(cfg.seeds.test))
        _baselines(cfg, rd, manifest, ex, thetas.shape[1], _seed_array(cfg.seeds.test), step,
                   progress, counter)
        certificates = step("certificates", lambda: certify(
            cfg, rd, manifest, matrices["cert"], matrices["test"], columns))
        placement = ex.placement()
        if placement is not None:
            say(placement)
    except (KeyboardInterrupt, WorkersLost):  # the finished chunks are kept, and so is the
        rd.save_timings(seconds, rollouts, cpu, interrupted=True)  # time they took
        raise
    except PacplanError as exc:  # a world refused its own costs mid-run (a NaN): as above,
        if any(rollouts.values()):  # once it has computed something
            rd.save_timings(seconds, rollouts, cpu, error=str(exc))
        raise
    finally:
        if own:
            ex.close()
    note = rd.save_timings(seconds, rollouts, cpu)
    if note is not None:
        say(note)
    return RunResult(run_dir=rd.path, certificates=certificates, seconds=seconds)
