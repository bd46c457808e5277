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
`utility_patience` iterations and off again as soon as it improves. The paper compares each
iteration's cost with the best so far; with `utility_criterion: ema` the criterion is an
exponential moving average of the cost instead, so one lucky noisy batch does not keep shaping
on for hundreds of iterations. `lr_schedule: cosine` decays both learning rates along a half
cosine over `iterations`. With `strata` (`pacplan.es.strata`) the environments are drawn by
stratum and each one's cost (or rank utility) is multiplied by its importance weight before the
estimator and the logged cost, which then stay unbiased for the world's expected cost.

The algorithm is ask/tell and pure: `ask` says which policies to fly on which environments,
the caller computes their costs however it likes (`pacplan.pipeline.prior.training` uses an
executor), and `tell` returns the next state and a metrics record. No files, no printing. Randomness
of iteration t comes from `SeedSequence([seed, t])`, so the state after t iterations is a pure
function of (config, t) and a resumed run reproduces the uninterrupted iterates bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacplan import portable
from pacplan.config import ESConfig
from pacplan.errors import PacplanError
from pacplan.es.strata import REST, StrataPlan
from pacplan.validation import check_unit_costs


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
        return portable.exp(0.5 * self.logvar)  # same bits on every CPU (pacplan.portable)


def init_state(cfg: ESConfig, dim: int, mean: np.ndarray | None = None,
               var: np.ndarray | None = None) -> ESState:
    """Prior at iteration 0: mu = init_mean, logvar = log(init_var); zero Adam moments.

    `mean` and `var` are what the caller read when `cfg.init_mean` / `cfg.init_var` name a
    file (one value per weight).
    """
    if mean is not None:
        mu = np.asarray(mean, dtype=np.float64).reshape(-1)
        if mu.shape != (dim,):
            raise PacplanError(f"es.init_mean has {mu.size} values but the policy has {dim} "
                               "weights")
    elif isinstance(cfg.init_mean, str):
        raise PacplanError("es.init_mean names a file: read it and pass its weights as `mean`")
    elif isinstance(cfg.init_mean, list):
        mu = np.asarray(cfg.init_mean, dtype=np.float64)
        if mu.shape != (dim,):
            raise PacplanError(
                f"es.init_mean has {mu.size} values but the policy has {dim} weights"
            )
    else:
        mu = np.full(dim, float(cfg.init_mean))
    if var is not None:
        v = np.asarray(var, dtype=np.float64).reshape(-1)
        if v.shape != (dim,):
            raise PacplanError(f"es.init_var has {v.size} values but the policy has {dim} "
                               "weights")
        if not np.all(v > 0):
            raise PacplanError("es.init_var: every variance must be > 0, found "
                               f"{float(v.min()):g} at weight {int(np.argmin(v))}")
        logvar = portable.log(v)
    elif isinstance(cfg.init_var, str):
        raise PacplanError("es.init_var names a file: read it and pass its values as `var`")
    else:
        if not cfg.init_var > 0:
            raise PacplanError(f"es.init_var must be > 0, got {cfg.init_var:g}")
        logvar = np.full(dim, float(portable.log(cfg.init_var)))
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
    raw = np.maximum(0.0, portable.log(lam / 2 + 1) - portable.log(np.arange(1, lam + 1)))
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
          cfg: ESConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    m = cfg.adam_beta1 * m + (1 - cfg.adam_beta1) * g
    v = cfg.adam_beta2 * v + (1 - cfg.adam_beta2) * g * g
    m_hat = m / (1 - cfg.adam_beta1**t)
    v_hat = v / (1 - cfg.adam_beta2**t)
    return x - lr * m_hat / (np.sqrt(v_hat) + cfg.adam_eps), m, v


@dataclass(frozen=True)
class Ask:
    """What iteration `iteration` needs evaluated: thetas[i] (2m̂ policies) on seeds[i].

    thetas (n, 2m̂, d) float32, the m̂ "+" policies first; with shared perturbations every row
    is the same (a broadcast view) and eps has one row. weights (n,): each environment's
    importance weight (1 without strata); cells (n,): its stratum cell, or None without strata.
    """

    iteration: int
    seeds: np.ndarray
    eps: np.ndarray
    thetas: np.ndarray
    shared: bool
    weights: np.ndarray | None = None
    cells: np.ndarray | None = None


def ask(state: ESState, cfg: ESConfig, seed_range: tuple[int, int],
        strata: StrataPlan | None = None) -> Ask:
    """The environments and antithetic policies of the next iteration (a pure function);
    `strata`, the checked plan of `cfg.strata`, draws the environments by stratum."""
    t = state.iteration
    rng = iteration_rng(cfg.seed, t)
    weights = cells = None
    if strata is None:
        seeds = sample_envs(rng, seed_range, cfg.envs_per_iter)
    else:
        seeds, weights = strata.sample(rng, seed_range)
        cells = strata.classify(seeds)
    n, m, d = len(seeds), cfg.pairs_per_env, state.mu.size
    shared = bool(cfg.shared_perturbations)
    # shared: one set of m pairs flown on every environment (common random numbers)
    eps = rng.standard_normal((1 if shared else n, m, d))
    step = state.sigma * eps
    thetas = np.concatenate([state.mu + step, state.mu - step], axis=1).astype(np.float32)
    if shared:
        thetas = np.broadcast_to(thetas, (n, *thetas.shape[1:]))
    return Ask(iteration=t, seeds=seeds, eps=eps, thetas=thetas, shared=shared, weights=weights,
               cells=cells)


def tell(state: ESState, cfg: ESConfig, asked: Ask, costs: np.ndarray
         ) -> tuple[ESState, dict[str, Any]]:
    """The next state from the costs (n, 2m̂) of `asked`, and the iteration's metrics record."""
    if asked.iteration != state.iteration:
        raise PacplanError(f"costs are for ES iteration {asked.iteration}, the state is at "
                           f"{state.iteration}")
    n, m = len(asked.seeds), cfg.pairs_per_env
    costs, _ = check_unit_costs(costs, f"ES iteration {asked.iteration} costs", shape=(n, 2 * m))
    t = state.iteration
    sigma = state.sigma
    w = np.ones(n) if asked.weights is None else np.asarray(asked.weights, dtype=np.float64)
    cost = float((costs * w[:, None]).mean())
    extra = dict(state.extra)
    criterion = cost
    if cfg.utility_criterion == "ema":
        previous = extra.get("ema_cost")
        if previous is not None:
            criterion = cfg.ema_decay * float(previous) + (1 - cfg.ema_decay) * cost
        extra["ema_cost"] = criterion
    best_cost, best_it, stall = state.best_cost, state.best_iteration, state.stall
    best_mu, best_lv = state.best_mu, state.best_logvar
    if criterion < best_cost - cfg.min_improvement:
        best_cost, best_it, stall = criterion, t, 0
        best_mu, best_lv = state.mu.copy(), state.logvar.copy()
    else:
        stall += 1
    utility = stall >= cfg.utility_patience

    fitness = (-rank_utilities(costs) if utility else costs) * w[:, None]
    if asked.shared:  # same ε on every environment: the estimator of the env-averaged fitness
        fitness = fitness.mean(axis=0, keepdims=True)
    g_mu, g_lv = es_gradients(asked.eps, fitness[:, :m], fitness[:, m:], sigma)
    k = t + 1
    scale = lr_factor(cfg, t)
    mu, m_mu, v_mu = _adam(state.mu, g_mu, state.m_mu, state.v_mu, k, cfg.lr_mu * scale, cfg)
    lv, m_lv, v_lv = _adam(state.logvar, g_lv, state.m_logvar, state.v_logvar, k,
                           cfg.lr_logvar * scale, cfg)
    lv = np.clip(lv, cfg.logvar_min, cfg.logvar_max)
    new = ESState(mu=mu, logvar=lv, m_mu=m_mu, v_mu=v_mu, m_logvar=m_lv, v_logvar=v_lv,
                  best_mu=best_mu, best_logvar=best_lv, iteration=k, best_cost=best_cost,
                  best_iteration=best_it, stall=stall, utility=utility, extra=extra)
    record = _record(t, costs, best_cost, sigma, g_mu, g_lv, state.mu, utility, stall)
    record["cost"] = cost
    if asked.cells is not None:
        record.update(_strata_record(costs, asked.cells, cfg))
    if cfg.utility_criterion == "ema":
        record["cost_ema"] = criterion
    if cfg.lr_schedule != "constant":
        record["lr_factor"] = scale
    return new, record


def lr_factor(cfg: ESConfig, t: int) -> float:
    """Multiplier of both learning rates at iteration t (0-based): 1 for a constant schedule; a
    half cosine from 1 at the first iteration to `lr_final_fraction` at the last."""
    if cfg.lr_schedule == "constant" or cfg.iterations <= 1:
        return 1.0
    frac = min(t, cfg.iterations - 1) / (cfg.iterations - 1)
    final = cfg.lr_final_fraction
    return final + (1.0 - final) * 0.5 * (1.0 + float(portable.cos(math.pi * frac)))


def _strata_record(costs: np.ndarray, cells: np.ndarray, cfg: ESConfig) -> dict[str, Any]:
    """The plain (unweighted) mean cost and each cell's environments and mean cost."""
    names = (*(cfg.strata or {}), REST)
    per_env = costs.mean(axis=1)
    strata = {}
    for j, name in enumerate(names):
        here = cells == j
        strata[name] = {"envs": int(here.sum()),
                        "cost": float(per_env[here].mean()) if here.any() else None}
    return {"cost_plain": float(costs.mean()), "strata": strata}


def _record(t: int, costs: np.ndarray, best: float, sigma: np.ndarray, g_mu: np.ndarray,
            g_lv: np.ndarray, mu: np.ndarray, utility: bool, stall: int) -> dict[str, Any]:
    """One line of metrics.jsonl."""
    return {
        "iteration": t,
        "cost": float(costs.mean()),
        "best": best,
        "cost_min": float(costs.min()),
        "cost_max": float(costs.max()),
        "sigma_mean": float(sigma.mean()),
        "sigma_min": float(sigma.min()),
        "sigma_max": float(sigma.max()),
        "grad_mu_norm": float(np.linalg.norm(g_mu)),
        "grad_logvar_norm": float(np.linalg.norm(g_lv)),
        "mu_norm": float(np.linalg.norm(mu)),
        "utility": utility,
        "stall": stall,
        "envs": len(costs),
        "rollouts": int(costs.size),
    }
