"""Prior training: the ES loop with a checkpoint per iteration, so a killed run resumes exactly.

Wires the pure algorithm (`pacplan.es.algorithm`: ask → costs → tell) to an executor, the run
directory's checkpoint files, a progress bar, the training-curve figure and, when tensorboard is
installed, TensorBoard scalars (`pacplan.pipeline.prior.tensorboard`). Resuming checks
the ES fingerprint (the identity of everything the iterates depend on) and refuses another one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import ESConfig, RunConfig, dump_config
from pacplan.errors import PacplanError
from pacplan.es import checkpoint as ckpt
from pacplan.es.algorithm import ESState, ask, init_state, tell
from pacplan.es.strata import StrataPlan, plan_strata
from pacplan.io.files import sha256_file
from pacplan.io.weights import load_theta
from pacplan.pipeline.execution.executors import Executor, WorldSpec, executor_from_config
from pacplan.pipeline.execution.progress import progress_bar
from pacplan.pipeline.prior.curve import plot_training_curve
from pacplan.pipeline.prior.tensorboard import ScalarLog, open_log
from pacplan.pipeline.rundir import RunDir, identity

PairedCostFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(thetas (n, k, d) float32, seeds (n,) int64) -> (n, k) costs in [0, 1], thetas[i] on seeds[i]."""


_WEIGHT_FILES = ("init_mean", "init_var")
"""ES settings that may name a file of one value per weight (counted by content)."""

_NOT_ITERATES = ("eval_every", "eval_envs", "prior_sigma_scale")
"""ES settings that change what is logged or how the prior file is written, never the iterates
(so a finished run given another `prior_sigma_scale` resumes and rewrites its prior file)."""


def es_fingerprint(cfg: RunConfig) -> str:
    """Identity of what the iterates depend on: world, prior seeds, es settings but `iterations`
    (a weights file as init_mean counts by its content, not where it lives).

    `iterations` counts only under a decaying learning-rate schedule, which it shapes (with a
    constant one a run may be extended). Settings at their defaults that older pacplan did not
    have are left out, so a checkpoint written before they existed still resumes.
    """
    es = cfg.es.model_dump(mode="json")
    if cfg.es.lr_schedule == "constant":
        es.pop("iterations")
    for name in _NOT_ITERATES:
        es.pop(name)
    defaults = ESConfig().model_dump(mode="json")
    for name in ("utility_criterion", "ema_decay", "lr_schedule", "lr_final_fraction", "strata"):
        if es.get(name) == defaults[name]:
            es.pop(name)
    for field in _WEIGHT_FILES:
        value = getattr(cfg.es, field)
        if isinstance(value, str):
            path = Path(value)
            if not path.is_file():
                raise PacplanError(f"es.{field} file not found: {path}")
            es[field] = {"sha256": sha256_file(path)}
    return identity({"world": cfg.world.model_dump(mode="json"), "prior": list(cfg.seeds.prior),
                     "es": es})


def read_start_files(cfg: ESConfig, dim: int, note: str = "") -> dict[str, np.ndarray]:
    """The files es.init_mean and es.init_var name, read and checked as ES starts from them
    (found, .npy or .safetensors, `dim` finite values, every variance > 0), so that the run's
    boundary can refuse a bad one before any stage (distillation) runs. A prior file (tensors
    mu and logvar) gives init_mean its mu and init_var its variance exp(logvar), so a prior can
    be fine-tuned from where it stands. Values are read as stored (float64 kept: ES's state is
    float64, so 0 iterations give back the very weights). `note`: the world's policy family
    (`policy_note`), named when a file has the wrong size."""
    files = {}
    for field in _WEIGHT_FILES:
        value = getattr(cfg, field)
        if isinstance(value, str):
            if not Path(value).is_file():
                raise PacplanError(f"es.{field} file not found: {value}")
            try:
                files[field] = (_prior_variance(value, dim) if field == "init_var"
                                and _is_prior_file(value) else
                                load_theta(value, dim, world=f"es.{field}", exact=True))
            except PacplanError as exc:
                from pacplan.worlds.base import noted

                raise noted(exc, note) from None
    init_state(cfg, dim, files.get("init_mean"), files.get("init_var"))  # refuses as ES would
    return files


def _is_prior_file(path: str) -> bool:
    """Whether `path` is a .safetensors file holding a prior (tensors mu and logvar)."""
    if not path.endswith(".safetensors"):
        return False
    from safetensors import safe_open

    try:
        with safe_open(path, framework="numpy") as fh:
            return {"mu", "logvar"} <= set(fh.keys())
    except Exception:  # unreadable: load_theta names the problem
        return False


def _prior_variance(path: str, dim: int) -> np.ndarray:
    """exp(logvar) of a prior file, checked (`read_prior_file`) and of `dim` weights."""
    prior = ckpt.read_prior_file(path)
    if prior.logvar.size != dim:
        raise PacplanError(f"{path}: expected {dim} es.init_var weights, got a prior of "
                           f"{prior.logvar.size}")
    return np.exp(prior.logvar.astype(np.float64))


def _refuse_other(state: ESState, fingerprint: str, rd: RunDir) -> None:
    if state.extra.get("fingerprint", "") != fingerprint:
        raise PacplanError(f"{rd.path} holds ES training for a different config (world, prior "
                           f"seeds or es settings changed); use a new {rd.option} directory")


def _annotate(state: ESState, cfg: ESConfig, notes: dict[str, Any]) -> None:
    """What the prior file states beside the iterates: `notes` and the σ scale it is written
    with (absent at 1, so a scale set back to 1 leaves no trace)."""
    state.extra.update(notes)
    if cfg.prior_sigma_scale != 1.0:
        state.extra["prior_sigma_scale"] = cfg.prior_sigma_scale
    else:
        state.extra.pop("prior_sigma_scale", None)


def _start(cfg: ESConfig, dim: int, rd: RunDir | None, fingerprint: str,
           seed_range: tuple[int, int], notes: dict[str, Any]) -> ESState:
    """The checkpointed state of `rd` (checked), or iteration 0, annotated (`_annotate`).

    The state records its seed range, which its prior file then states (`prior_seeds`).
    """
    seeds = [int(seed_range[0]), int(seed_range[1])]
    if rd is not None:
        files = rd.checkpoint_files()
        state = ckpt.load_checkpoint(files)
        if state is not None:
            _refuse_other(state, fingerprint, rd)
            if state.extra.get("prior_seeds") != seeds:
                raise PacplanError(f"{rd.path} holds ES training on seeds "
                                   f"{state.extra.get('prior_seeds')}, not {seeds}; use a new "
                                   f"{rd.option} directory")
            if state.mu.size != dim:
                raise PacplanError(f"{rd.path}: checkpoint has {state.mu.size} weights, "
                                   f"world has {dim}")
            ckpt.truncate_metrics(files.metrics, state.iteration)
            _annotate(state, cfg, notes)
            # re-derive prior + JSON (a crash may have split the writes; notes may have changed)
            ckpt.save_checkpoint(files, state)
            return state
        files.metrics.unlink(missing_ok=True)
    files = read_start_files(cfg, dim)
    state = init_state(cfg, dim, files.get("init_mean"), files.get("init_var"))
    state.extra["fingerprint"] = fingerprint
    state.extra["prior_seeds"] = seeds
    _annotate(state, cfg, notes)
    return state


def run_es(
    cfg: ESConfig,
    dim: int,
    cost_fn: PairedCostFn,
    seed_range: tuple[int, int],
    run_dir: str | Path | RunDir | None = None,
    fingerprint: str = "",
    progress: bool = False,
    stop_after: int | None = None,
    on_iteration: Callable[[ESState, dict[str, Any]], None] | None = None,
    evaluate: Callable[[np.ndarray], float] | None = None,
    log: Callable[[str], None] | None = None,
    notes: dict[str, Any] | None = None,
    strata: StrataPlan | None = None,
) -> ESState:
    """Run ES for `cfg.iterations` iterations (resuming from `run_dir` when it has a checkpoint).

    `fingerprint` identifies everything the iterates depend on; resuming with another one is
    refused. `stop_after` ends this call after that many iterations (a deterministic interrupt).
    `evaluate(mu)` (the held-out cost of the prior's mean) is logged every `cfg.eval_every`
    iterations as `eval_cost`; it never changes the iterates. `log` hears where a resumed
    run picks up. `notes` (JSON values, e.g. how the start was distilled) are recorded in the
    state and in the prior file's metadata.
    """
    rd = run_dir if isinstance(run_dir, RunDir) or run_dir is None else RunDir(run_dir)
    if rd is not None:
        rd.path.mkdir(parents=True, exist_ok=True)
    if cfg.strata is not None and strata is None:
        raise PacplanError("es.strata is set: pass its plan (pacplan.es.strata.plan_strata)")
    notes = dict(notes or {})
    if strata is not None:
        notes["strata"] = strata.summary()
    state = _start(cfg, dim, rd, fingerprint, seed_range, notes)
    todo = max(0, cfg.iterations - state.iteration)
    if state.iteration > 0 and log is not None:
        log(f"resumed: ES at iteration {state.iteration} of {cfg.iterations}"
            + ("" if todo else " (done)"))
    if stop_after is not None:
        todo = min(todo, stop_after)
    board = (open_log(rd.path, ckpt.read_metrics(rd / RunDir.METRICS))
             if rd is not None and cfg.iterations else None)  # 0 iterations: nothing to plot
    try:
        state = _iterate(cfg, state, todo, cost_fn, seed_range, rd, progress, on_iteration,
                         evaluate, board, strata)
        if rd is not None and state.iteration == 0 and cfg.iterations == 0:
            ckpt.save_checkpoint(rd.checkpoint_files(), state)  # no ES: the start is the prior
    finally:
        if board is not None:
            board.close()
    if rd is not None and state.iteration > 0:
        plot_training_curve(ckpt.read_metrics(rd / RunDir.METRICS), rd / RunDir.TRAINING_CURVE)
    return state


def _iterate(cfg: ESConfig, state: ESState, todo: int, cost_fn: PairedCostFn,
             seed_range: tuple[int, int], rd: RunDir | None, progress: bool,
             on_iteration: Callable[[ESState, dict[str, Any]], None] | None,
             evaluate: Callable[[np.ndarray], float] | None, board: ScalarLog | None,
             strata: StrataPlan | None = None) -> ESState:
    """`todo` ES iterations from `state`, each logged and checkpointed; the last state."""
    with progress_bar(progress, "ES", cfg.iterations, state.iteration) as bar:
        for _ in range(todo):
            t0 = time.perf_counter()
            asked = ask(state, cfg, seed_range, strata)
            state, record = tell(state, cfg, asked, cost_fn(asked.thetas, asked.seeds))
            record["seconds"] = round(time.perf_counter() - t0, 6)
            if evaluate is not None and cfg.eval_every and state.iteration % cfg.eval_every == 0:
                t1 = time.perf_counter()
                record["eval_cost"] = float(evaluate(state.mu))
                record["eval_envs"] = cfg.eval_envs
                record["eval_seconds"] = round(time.perf_counter() - t1, 6)
            if rd is not None:
                files = rd.checkpoint_files()
                ckpt.append_metric(files.metrics, record)
                ckpt.save_checkpoint(files, state)
            if board is not None:
                board.add(record)
            if on_iteration is not None:
                on_iteration(state, record)
            bar.advance(f"ES cost {record['cost']:.4f} best {record['best']:.4f} "
                        f"σ {record['sigma_mean']:.3f}{' [utility]' if record['utility'] else ''}")
    return state


def train_prior(
    cfg: RunConfig,
    run_dir: str | Path | RunDir,
    executor: Executor | None = None,
    progress: bool = True,
    stop_after: int | None = None,
    log: Callable[[str], None] | None = None,
) -> ESState:
    """Train (or resume) the prior of `cfg` into `run_dir`; `log` hears where a resume starts.

    Uses `executor` if given (left open), otherwise builds one from `cfg.executor` and closes it.
    The result does not depend on the executor kind or worker count. The run directory is
    locked meanwhile: another process training or running there is refused.
    """
    from pacplan.worlds.base import make_world, policy_note

    spec = WorldSpec(cfg.world.name, dict(cfg.world.options))
    world = make_world(spec.name, **spec.options)  # options checked first
    dim = int(world.policy_dim())
    # before the run directory is made or distillation runs
    read_start_files(cfg.es, dim, policy_note(world))
    strata = (None if cfg.es.strata is None else
              plan_strata(cfg.es.strata, cfg.es.envs_per_iter, world, tuple(cfg.seeds.prior)))
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    with rd.locked():
        return _train_prior(cfg, rd, spec, dim, executor, progress, stop_after, log, strata)


def _train_prior(cfg: RunConfig, rd: RunDir, spec: WorldSpec, dim: int,
                 executor: Executor | None, progress: bool, stop_after: int | None,
                 log: Callable[[str], None] | None = None,
                 strata: StrataPlan | None = None) -> ESState:
    notes: dict[str, Any] = {"world": {"name": spec.name, "options": dict(spec.options)}}
    given = cfg
    if cfg.distill is not None:  # a taught net is where ES starts (`prior.distill`)
        from pacplan.pipeline.prior.distill import distill, distilled_summary

        cfg = cfg.model_copy(deep=True)
        cfg.es.init_mean = str(distill(cfg, rd, log=log))
        notes["distill"] = distilled_summary(cfg.es.init_mean)
    fp = es_fingerprint(cfg)
    existing = ckpt.load_checkpoint(rd.checkpoint_files())
    if existing is not None:
        _refuse_other(existing, fp, rd)
    own = executor is None
    ex = executor_from_config(cfg.executor) if own else executor
    try:
        dump_config(given, rd / RunDir.CONFIG)

        def cost_fn(thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
            if cfg.es.shared_perturbations:  # the same policies everywhere: one full matrix
                return ex.cost_matrix(spec, thetas[0], seeds)
            return ex.paired_costs(spec, thetas, seeds)

        evaluate = None
        if cfg.es.eval_every and cfg.seeds.prior_eval is not None:
            start = cfg.seeds.prior_eval[0]
            eval_seeds = np.arange(start, start + cfg.es.eval_envs, dtype=np.int64)

            def evaluate(mu: np.ndarray) -> float:
                theta = np.asarray(mu, dtype=np.float32)[None]
                return float(ex.cost_matrix(spec, theta, eval_seeds).mean())

        return run_es(cfg.es, dim, cost_fn, tuple(cfg.seeds.prior), rd, fingerprint=fp,
                      progress=progress, stop_after=stop_after, evaluate=evaluate, log=log,
                      notes=notes, strata=strata)
    finally:
        if own:
            ex.close()
