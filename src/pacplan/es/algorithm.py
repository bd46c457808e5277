"""Evolution Strategies for the PAC-Bayes prior N(mu, diag sigma^2) (Veer & Majumdar 2020, §4.1).

Each iteration draws `envs_per_iter` prior-training environments and, per environment, m̂
antithetic pairs θ = mu ± sigma·ε. With fitness f (the cost, or minus the rank utility):

    grad_mu     = mean_env mean_pair  (f+ − f−)/2 · ε / sigma
    grad_logvar = mean_env mean_pair ((f+ + f−)/2 − b_env) · (ε² − 1) / 2

(the score-function gradients of E f w.r.t. mu and log sigma² = logvar; b_env, the mean fitness
of the environment's 2m̂ rollouts, is a per-environment baseline that leaves the expectation
unchanged). Adam updates mu and logvar with separate learning rates. With
`shared_perturbations` the m̂ pairs are drawn once per iteration and flown on every environment
(common random numbers): the estimator is the same with the fitness averaged over environments
(after the per-environment baseline or ranking), and the n × 2m̂ rollouts form one cost matrix
that a batching world (the UAV's) evaluates as one tensor program. Rank-utility shaping
(NES utilities, per environment) switches on when the training cost has not improved for
`utility_patience` iterations and off again as soon as it improves.

This module knows nothing of robots: `run_es` takes a paired cost function; `train_prior` wires a
`RunConfig` to a world spec and an executor. Randomness of iteration t comes from
`SeedSequence([seed, t])`, so the RNG state is fully determined by (seed, iteration) and a resumed
run reproduces the uninterrupted iterates bit for bit. Every iteration is checkpointed atomically.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError

PairedCostFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(thetas (n, k, d) float32, seeds (n,) int64) -> (n, k) costs in [0, 1], thetas[i] on seeds[i]."""

STATE_FILE = "es_state.safetensors"
STATE_JSON = "es_state.json"
PRIOR_FILE = "prior.safetensors"
METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "figures/prior_training.png"
_FORMAT = 1
_ARRAYS = ("mu", "logvar", "m_mu", "v_mu", "m_logvar", "v_logvar", "best_mu", "best_logvar")


@dataclass
class ESState:
    """Everything needed to continue ES exactly; `iteration` counts completed iterations."""

    mu: np.ndarray
    logvar: np.ndarray
    m_mu: np.ndarray
    v_mu: np.ndarray
    m_logvar: np.ndarray
    v_logvar: np.ndarray
    best_mu: np.ndarray
    best_logvar: np.ndarray
    iteration: int = 0
    best_cost: float = math.inf
    best_iteration: int = -1
    stall: int = 0
    utility: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sigma(self) -> np.ndarray:
        return np.exp(0.5 * self.logvar)


def init_state(cfg: Any, dim: int) -> ESState:
    """Prior at iteration 0: mu = init_mean, logvar = log(init_var); zero Adam moments."""
    if isinstance(cfg.init_mean, str):
        from pacplan.weights import load_theta

        mu = load_theta(cfg.init_mean, dim, world="es.init_mean").astype(np.float64)
    elif isinstance(cfg.init_mean, list):
        mu = np.asarray(cfg.init_mean, dtype=np.float64)
        if mu.shape != (dim,):
            raise PacplanError(
                f"es.init_mean has {mu.size} values but the policy has {dim} weights"
            )
    else:
        mu = np.full(dim, float(cfg.init_mean))
    logvar = np.full(dim, math.log(cfg.init_var))
    logvar = np.clip(logvar, cfg.logvar_min, cfg.logvar_max)
    z = np.zeros(dim)
    return ESState(mu=mu, logvar=logvar, m_mu=z.copy(), v_mu=z.copy(), m_logvar=z.copy(),
                   v_logvar=z.copy(), best_mu=mu.copy(), best_logvar=logvar.copy())


def iteration_rng(seed: int, iteration: int) -> np.random.Generator:
    """The generator of iteration t: a pure function of (seed, t), hence trivially resumable."""
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), int(iteration)])))


def sample_envs(rng: np.random.Generator, seed_range: tuple[int, int], n: int) -> np.ndarray:
    """n distinct prior-training seeds from [start, stop) (all of them, in order, if n >= size)."""
    start, stop = seed_range
    size = stop - start
    if n >= size:
        return np.arange(start, stop, dtype=np.int64)
    return np.sort(rng.choice(size, size=n, replace=False)).astype(np.int64) + start


def rank_utilities(costs: np.ndarray) -> np.ndarray:
    """NES rank utilities per row (lowest cost gets the largest utility); rows sum to zero.

    u_k ∝ max(0, ln(λ/2 + 1) − ln k) for rank k = 1..λ, normalized, minus 1/λ. Tied costs share the
    mean utility of their ranks, so a perfectly flat row gives zero everywhere.
    """
    n, lam = costs.shape
    raw = np.maximum(0.0, math.log(lam / 2 + 1) - np.log(np.arange(1, lam + 1)))
    u_sorted = raw / raw.sum() - 1.0 / lam
    out = np.empty_like(costs, dtype=np.float64)
    for i in range(n):
        order = np.argsort(costs[i], kind="stable")
        u = np.empty(lam)
        u[order] = u_sorted
        vals, inverse = np.unique(costs[i], return_inverse=True)
        if len(vals) == 1:  # a flat row carries no ranking signal
            u[:] = 0.0
        elif len(vals) < lam:  # average over ties
            u = (np.bincount(inverse, weights=u) / np.bincount(inverse))[inverse]
        out[i] = u
    return out


def es_gradients(eps: np.ndarray, f_plus: np.ndarray, f_minus: np.ndarray,
                 sigma: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Antithetic score-function gradients of E f w.r.t. (mu, logvar).

    eps (n, m, d); f_plus, f_minus (n, m) fitness of mu ± sigma·eps; per-environment baseline.
    """
    diff = 0.5 * (f_plus - f_minus)
    avg = 0.5 * (f_plus + f_minus)
    centred = avg - avg.mean(axis=1, keepdims=True)
    n, m = diff.shape
    g_mu = np.einsum("nm,nmd->d", diff, eps) / (n * m) / sigma
    g_lv = np.einsum("nm,nmd->d", centred, eps * eps - 1.0) / (2 * n * m)
    return g_mu, g_lv


def _adam(x: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray, t: int, lr: float,
          cfg: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = cfg.adam_beta1 * m + (1 - cfg.adam_beta1) * g
    v = cfg.adam_beta2 * v + (1 - cfg.adam_beta2) * g * g
    m_hat = m / (1 - cfg.adam_beta1**t)
    v_hat = v / (1 - cfg.adam_beta2**t)
    return x - lr * m_hat / (np.sqrt(v_hat) + cfg.adam_eps), m, v


def es_step(state: ESState, cfg: Any, cost_fn: PairedCostFn, seed_range: tuple[int, int]
            ) -> tuple[ESState, dict[str, Any]]:
    """One ES iteration from `state`; returns the next state and its metrics record."""
    t = state.iteration
    rng = iteration_rng(cfg.seed, t)
    seeds = sample_envs(rng, seed_range, cfg.envs_per_iter)
    n, m, d = len(seeds), cfg.pairs_per_env, state.mu.size
    shared = bool(getattr(cfg, "shared_perturbations", False))
    # shared: one set of m pairs flown on every environment (common random numbers)
    eps = rng.standard_normal((1 if shared else n, m, d))
    sigma = state.sigma
    step = sigma * eps
    thetas = np.concatenate([state.mu + step, state.mu - step], axis=1).astype(np.float32)
    if shared:
        thetas = np.broadcast_to(thetas, (n, *thetas.shape[1:]))
    costs = np.asarray(cost_fn(thetas, seeds), dtype=np.float64)
    if costs.shape != (n, 2 * m):
        raise PacplanError(f"cost function returned shape {costs.shape}, expected {(n, 2 * m)}")
    if not np.all((costs >= 0.0) & (costs <= 1.0)):
        raise PacplanError("cost function returned values outside [0, 1] or NaN")

    cost = float(costs.mean())
    best_cost, best_it, stall = state.best_cost, state.best_iteration, state.stall
    best_mu, best_lv = state.best_mu, state.best_logvar
    if cost < best_cost - cfg.min_improvement:
        best_cost, best_it, stall = cost, t, 0
        best_mu, best_lv = state.mu.copy(), state.logvar.copy()
    else:
        stall += 1
    utility = stall >= cfg.utility_patience

    fitness = -rank_utilities(costs) if utility else costs
    if shared:  # same ε on every environment: the estimator of the env-averaged fitness
        fitness = fitness.mean(axis=0, keepdims=True)
    g_mu, g_lv = es_gradients(eps, fitness[:, :m], fitness[:, m:], sigma)
    k = t + 1
    mu, m_mu, v_mu = _adam(state.mu, g_mu, state.m_mu, state.v_mu, k, cfg.lr_mu, cfg)
    lv, m_lv, v_lv = _adam(state.logvar, g_lv, state.m_logvar, state.v_logvar, k,
                           cfg.lr_logvar, cfg)
    lv = np.clip(lv, cfg.logvar_min, cfg.logvar_max)
    new = ESState(mu=mu, logvar=lv, m_mu=m_mu, v_mu=v_mu, m_logvar=m_lv, v_logvar=v_lv,
                  best_mu=best_mu, best_logvar=best_lv, iteration=k, best_cost=best_cost,
                  best_iteration=best_it, stall=stall, utility=utility, extra=dict(state.extra))
    record = {
        "iteration": t,
        "cost": cost,
        "best": best_cost,
        "cost_min": float(costs.min()),
        "cost_max": float(costs.max()),
        "sigma_mean": float(sigma.mean()),
        "sigma_min": float(sigma.min()),
        "sigma_max": float(sigma.max()),
        "grad_mu_norm": float(np.linalg.norm(g_mu)),
        "grad_logvar_norm": float(np.linalg.norm(g_lv)),
        "mu_norm": float(np.linalg.norm(state.mu)),
        "utility": utility,
        "stall": stall,
        "envs": n,
        "rollouts": int(costs.size),
    }
    return new, record


# -- checkpoints ----------------------------------------------------------------------------------
def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _scalars(state: ESState) -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "iteration": state.iteration,
        "best_cost": state.best_cost if math.isfinite(state.best_cost) else None,
        "best_iteration": state.best_iteration,
        "stall": state.stall,
        "utility": state.utility,
        **state.extra,
    }


def save_checkpoint(run_dir: Path, state: ESState) -> None:
    """Atomically write es_state.safetensors (the source of truth), prior.safetensors and JSON."""
    from safetensors.numpy import save

    run_dir = Path(run_dir)
    meta = {"es": json.dumps(_scalars(state), sort_keys=True)}
    arrays = {k: np.ascontiguousarray(getattr(state, k), dtype=np.float64) for k in _ARRAYS}
    _atomic_write_bytes(run_dir / STATE_FILE, save(arrays, metadata=meta))
    prior_meta = {"iteration": str(state.iteration), "parametrization": "N(mu, diag exp(logvar))"}
    _atomic_write_bytes(run_dir / PRIOR_FILE,
                        save({"mu": arrays["mu"], "logvar": arrays["logvar"]}, metadata=prior_meta))
    info = _scalars(state) | {
        "rng": {"generator": "PCG64(SeedSequence([es.seed, iteration]))",
                "next_iteration": state.iteration},
        "sigma_mean": float(state.sigma.mean()),
    }
    _atomic_write_bytes(run_dir / STATE_JSON, (json.dumps(info, indent=2) + "\n").encode())


def load_checkpoint(run_dir: Path) -> ESState | None:
    """The saved ES state of a run directory, or None when it has none."""
    from safetensors import safe_open

    path = Path(run_dir) / STATE_FILE
    if not path.exists():
        return None
    try:
        with safe_open(str(path), framework="numpy") as fh:
            meta = json.loads((fh.metadata() or {})["es"])
            arrays = {k: fh.get_tensor(k) for k in _ARRAYS}
    except Exception as exc:
        raise PacplanError(f"{path}: unreadable ES checkpoint ({exc})") from None
    if meta.get("format") != _FORMAT:
        raise PacplanError(f"{path}: unsupported checkpoint format {meta.get('format')}")
    best = meta.pop("best_cost")
    core = {k: meta.pop(k) for k in ("iteration", "best_iteration", "stall", "utility")}
    meta.pop("format")
    return ESState(**arrays, **core, best_cost=math.inf if best is None else float(best),
                   extra=meta)


def load_prior(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(mu, logvar) from a prior.safetensors file (or a run directory holding one)."""
    from safetensors.numpy import load_file

    p = Path(path)
    if p.is_dir():
        p = p / PRIOR_FILE
    if not p.is_file():
        raise PacplanError(f"no prior found at {p}; run `pacplan train-prior` first")
    try:
        t = load_file(str(p))
    except Exception as exc:
        raise PacplanError(f"{p}: unreadable prior ({exc})") from None
    if "mu" not in t or "logvar" not in t:
        raise PacplanError(f"{p}: a prior needs tensors 'mu' and 'logvar'")
    return t["mu"], t["logvar"]


def read_metrics(run_dir: str | Path) -> list[dict[str, Any]]:
    """The metrics.jsonl records of a run, in order."""
    p = Path(run_dir) / METRICS_FILE
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def _truncate_metrics(run_dir: Path, upto: int) -> None:
    """Drop records of iterations >= upto (written before a crash, redone after resume)."""
    p = run_dir / METRICS_FILE
    if not p.exists():
        return
    keep = []
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:  # a line cut short by the crash
            continue
        if isinstance(rec, dict) and isinstance(rec.get("iteration"), int) and (
            rec["iteration"] < upto
        ):
            keep.append(rec)
    _atomic_write_bytes(p, "".join(json.dumps(r) + "\n" for r in keep).encode())


def _append_metric(run_dir: Path, record: dict[str, Any]) -> None:
    with open(run_dir / METRICS_FILE, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")
        fh.flush()
        os.fsync(fh.fileno())


# -- the loop ---------------------------------------------------------------------------------
def run_es(
    cfg: Any,
    dim: int,
    cost_fn: PairedCostFn,
    seed_range: tuple[int, int],
    run_dir: str | Path | None = None,
    fingerprint: str = "",
    progress: bool = False,
    stop_after: int | None = None,
    on_iteration: Callable[[ESState, dict[str, Any]], None] | None = None,
) -> ESState:
    """Run ES for `cfg.iterations` iterations (resuming from `run_dir` when it has a checkpoint).

    `fingerprint` identifies everything the iterates depend on; resuming with another one is
    refused. `stop_after` ends this call after that many iterations (a deterministic interrupt).
    """
    state: ESState | None = None
    rd = Path(run_dir) if run_dir is not None else None
    if rd is not None:
        rd.mkdir(parents=True, exist_ok=True)
        state = load_checkpoint(rd)
        if state is not None:
            if state.extra.get("fingerprint", "") != fingerprint:
                raise PacplanError(
                    f"{rd} holds ES training for a different config (world, prior seeds or es "
                    "settings changed); use a new --out directory"
                )
            if state.mu.size != dim:
                raise PacplanError(f"{rd}: checkpoint has {state.mu.size} weights, world has {dim}")
            _truncate_metrics(rd, state.iteration)
            save_checkpoint(rd, state)  # re-derive prior + JSON if a crash split the writes
        elif (rd / METRICS_FILE).exists():
            (rd / METRICS_FILE).unlink()
    if state is None:
        state = init_state(cfg, dim)
        state.extra["fingerprint"] = fingerprint
    todo = max(0, cfg.iterations - state.iteration)
    if stop_after is not None:
        todo = min(todo, stop_after)

    bar = _progress(progress, cfg.iterations, state.iteration)
    try:
        for _ in range(todo):
            t0 = time.perf_counter()
            state, record = es_step(state, cfg, cost_fn, seed_range)
            record["seconds"] = round(time.perf_counter() - t0, 6)
            if rd is not None:
                _append_metric(rd, record)
                save_checkpoint(rd, state)
            if on_iteration is not None:
                on_iteration(state, record)
            if bar is not None:
                bar[0].update(bar[1], advance=1, description=(
                    f"ES cost {record['cost']:.4f} best {record['best']:.4f} "
                    f"σ {record['sigma_mean']:.3f}{' [utility]' if record['utility'] else ''}"))
    finally:
        if bar is not None:
            bar[0].stop()
    if rd is not None and state.iteration > 0:
        plot_training_curve(rd)
    return state


def _progress(enabled: bool, total: int, done: int) -> tuple[Any, Any] | None:
    if not enabled:
        return None
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    prog = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeRemainingColumn())
    task = prog.add_task("ES", total=total, completed=done)
    prog.start()
    return prog, task


def plot_training_curve(run_dir: str | Path, out: str | Path | None = None) -> Path | None:
    """PNG of training cost, best cost and mean sigma per iteration (utility phases shaded)."""
    records = read_metrics(run_dir)
    if not records:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    it = np.array([r["iteration"] for r in records])
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(it, [r["cost"] for r in records], lw=1, label="training cost")
    ax.plot(it, [r["best"] for r in records], lw=1.5, label="best so far")
    for r in records:
        if r["utility"]:
            ax.axvspan(r["iteration"] - 0.5, r["iteration"] + 0.5, color="orange", alpha=0.15,
                       lw=0)
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost")
    ax.set_ylim(0, 1)
    ax2 = ax.twinx()
    ax2.plot(it, [r["sigma_mean"] for r in records], color="gray", ls="--", lw=1,
             label="mean σ")
    ax2.set_ylabel("mean σ")
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper right", fontsize=8)
    ax.set_title("ES prior training (shaded: rank-utility shaping on)")
    fig.tight_layout()
    path = Path(out) if out is not None else Path(run_dir) / CURVE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return path


# -- wiring a run config -------------------------------------------------------------------
def es_fingerprint(cfg: Any) -> str:
    """sha256 of what the iterates depend on: world, prior seeds, es settings but `iterations`."""
    es = cfg.es.model_dump(mode="json")
    es.pop("iterations")
    if isinstance(cfg.es.init_mean, str):  # the file's content counts, not where it lives
        path = Path(cfg.es.init_mean)
        if not path.is_file():
            raise PacplanError(f"es.init_mean file not found: {path}")
        es["init_mean"] = {"sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    payload = {"world": cfg.world.model_dump(mode="json"), "prior": list(cfg.seeds.prior),
               "es": es}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def train_prior(
    cfg: Any,
    run_dir: str | Path,
    executor: Any = None,
    progress: bool = True,
    stop_after: int | None = None,
) -> ESState:
    """Train (or resume) the prior of `cfg` (a RunConfig) into `run_dir`.

    Uses `executor` if given (left open), otherwise builds one from `cfg.executor` and closes it.
    The result does not depend on the executor kind or worker count.
    """
    from pacplan.config import dump_config
    from pacplan.run.executors import WorldSpec, executor_from_config, get_world

    rd = Path(run_dir)
    rd.mkdir(parents=True, exist_ok=True)
    spec = WorldSpec(cfg.world.name, dict(cfg.world.options))
    dim = int(get_world(spec).policy_dim())
    own = executor is None
    ex = executor_from_config(cfg.executor) if own else executor
    try:
        fp = es_fingerprint(cfg)
        existing = load_checkpoint(rd)
        if existing is not None and existing.extra.get("fingerprint") != fp:
            raise PacplanError(
                f"{rd} holds ES training for a different config (world, prior seeds or es "
                "settings changed); use a new --out directory"
            )
        dump_config(cfg, rd / "config.yaml")

        def cost_fn(thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
            if cfg.es.shared_perturbations:  # the same policies everywhere: one full matrix
                return ex.cost_matrix(spec, thetas[0], seeds)
            return ex.paired_costs(spec, thetas, seeds)

        return run_es(cfg.es, dim, cost_fn, tuple(cfg.seeds.prior), rd, fingerprint=fp,
                      progress=progress, stop_after=stop_after)
    finally:
        if own:
            ex.close()
