"""ES settings for large noisy batches: the moving-average utility switch, the cosine learning
rate, and the held-out evaluation of the prior's mean (logged, never steering)."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from pacplan.config import ESConfig, parse_config
from pacplan.errors import PacplanError
from pacplan.es.algorithm import lr_factor
from pacplan.pipeline.prior.training import es_fingerprint, run_es

_SEEDS = {"prior": [0, 500], "cert": [1000, 2000], "test": [3000, 4000]}


def _run_cfg(seeds: dict | None = None, **es: object):
    base = {"iterations": 20, "envs_per_iter": 6, "pairs_per_env": 4, "lr_mu": 0.1,
            "lr_logvar": 0.1, "seed": 3}
    return parse_config({"name": "t", "world": {"name": "toy", "options": {"dim": 5}},
                         "seeds": seeds or _SEEDS, "es": base | es})


def _scripted(levels: list[float]):
    calls = {"t": 0}

    def cost_fn(thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        lvl = levels[calls["t"]]
        calls["t"] += 1
        return lvl + 0.01 * np.tanh(thetas[..., 0].astype(np.float64))

    return cost_fn


def test_ema_criterion_is_the_moving_average_of_the_cost() -> None:
    """The criterion is the exponential moving average of the training cost (checked by its
    own recurrence) and `best` is its running minimum; the paper's rule keeps the lucky batch."""
    levels = [0.5, 0.5, 0.1, 0.5, 0.5, 0.5, 0.5, 0.5]
    seen: dict[str, list[dict]] = {"iteration": [], "ema": []}
    for crit in seen:
        cfg = ESConfig(iterations=len(levels), envs_per_iter=3, pairs_per_env=4,
                       utility_patience=3, utility_criterion=crit, ema_decay=0.8, seed=0)
        run_es(cfg, 2, _scripted(levels), (0, 100), on_iteration=lambda s, r, c=crit:
               seen[c].append(r))
    paper = seen["iteration"]
    assert [r["best"] for r in paper][2:] == [pytest.approx(np.mean(paper[2]["cost"]))] * 6
    assert [r["utility"] for r in paper] == [False] * 5 + [True] * 3
    # independent recurrence of the moving average
    ema, expected = None, []
    for r in seen["ema"]:
        ema = r["cost"] if ema is None else 0.8 * ema + 0.2 * r["cost"]
        expected.append(ema)
    assert [r["cost_ema"] for r in seen["ema"]] == pytest.approx(expected, abs=1e-12)
    assert all(r["best"] == pytest.approx(min(expected[: i + 1]))
               for i, r in enumerate(seen["ema"]))


def test_cosine_schedule_endpoints_midpoint_and_monotone() -> None:
    cfg = ESConfig(iterations=101, lr_schedule="cosine", lr_final_fraction=0.2)
    f = [lr_factor(cfg, t) for t in range(101)]
    assert f[0] == 1.0 and f[-1] == pytest.approx(0.2) and f[50] == pytest.approx(0.6)
    assert all(a >= b for a, b in itertools.pairwise(f))
    assert lr_factor(ESConfig(iterations=101), 70) == 1.0


def test_cosine_schedule_scales_the_first_adam_step() -> None:
    """Adam's first step moves each weight by lr·sign(g) (bias-corrected), so the step taken at a
    scaled rate is the constant-rate step times the factor."""
    def first_step(**kw: object) -> np.ndarray:
        cfg = ESConfig(iterations=3, envs_per_iter=3, pairs_per_env=4, seed=0, lr_mu=0.1, **kw)
        state = run_es(cfg, 2, lambda th, s: 0.5 + 0.1 * np.tanh(th[..., 0]), (0, 100),
                       stop_after=1)
        return state.mu
    const = first_step()
    cos = first_step(lr_schedule="cosine", lr_final_fraction=0.5)
    assert np.allclose(cos, const)  # factor 1 at t = 0
    cfg = ESConfig(iterations=3, lr_schedule="cosine", lr_final_fraction=0.5)
    assert lr_factor(cfg, 1) == pytest.approx(0.75) and lr_factor(cfg, 2) == pytest.approx(0.5)


def test_fingerprint_keeps_old_runs_resumable_and_sees_what_shapes_iterates() -> None:
    base = es_fingerprint(_run_cfg())
    # pinned: the fingerprint of this config before these settings existed
    assert base == "3a6f2526edf0cc7334313abeb191169ebd716483cc7e33f85e8382d477ffd13e"
    with_eval = _run_cfg(seeds=_SEEDS | {"prior_eval": [5000, 5100]}, eval_every=5,
                         eval_envs=50)
    assert es_fingerprint(with_eval) == base  # logging only
    assert es_fingerprint(_run_cfg(iterations=40)) == base  # a constant-rate run may extend
    cos20 = es_fingerprint(_run_cfg(lr_schedule="cosine"))
    assert cos20 != base
    assert es_fingerprint(_run_cfg(lr_schedule="cosine", iterations=40)) != cos20
    assert es_fingerprint(_run_cfg(utility_criterion="ema")) != base


def test_evaluation_is_logged_every_k_and_never_changes_the_iterates(tmp_path: Path) -> None:
    cfg = ESConfig(iterations=9, envs_per_iter=3, pairs_per_env=4, seed=0, eval_every=3)
    fn = lambda th, s: 0.5 + 0.1 * np.tanh(th[..., 0].astype(np.float64))  # noqa: E731
    seen_mu: list[np.ndarray] = []

    def evaluate(mu: np.ndarray) -> float:
        seen_mu.append(mu.copy())
        return float(0.5 + 0.1 * math.tanh(mu[0]))

    plain = run_es(cfg, 2, fn, (0, 100))
    records: list[dict] = []
    logged = run_es(cfg, 2, fn, (0, 100), evaluate=evaluate,
                    on_iteration=lambda s, r: records.append(r))
    assert np.array_equal(plain.mu, logged.mu) and np.array_equal(plain.logvar, logged.logvar)
    evals = [(r["iteration"], r["eval_cost"]) for r in records if "eval_cost" in r]
    assert [i for i, _ in evals] == [2, 5, 8]
    assert np.array_equal(seen_mu[-1], logged.mu)  # the mean after the iteration's update
    assert evals[-1][1] == pytest.approx(0.5 + 0.1 * math.tanh(logged.mu[0]))


def test_eval_needs_its_held_out_seeds_disjoint_from_the_others() -> None:
    with pytest.raises(PacplanError, match=r"es\.eval_every needs seeds\.prior_eval"):
        _run_cfg(eval_every=5)
    with pytest.raises(PacplanError, match=r"prior_eval \[900, 1100\) and cert"):
        _run_cfg(seeds=_SEEDS | {"prior_eval": [900, 1100]}, eval_every=5)
    with pytest.raises(PacplanError, match=r"eval_envs 300 exceeds the 100 seeds"):
        _run_cfg(seeds=_SEEDS | {"prior_eval": [5000, 5100]}, eval_every=5, eval_envs=300)


def test_train_prior_logs_the_held_out_cost_of_the_mean(tmp_path: Path) -> None:
    from pacplan.pipeline.prior.training import train_prior
    from pacplan.worlds.toy import ToyWorld

    cfg = _run_cfg(seeds=_SEEDS | {"prior_eval": [5000, 5040]}, iterations=4, eval_every=2,
                   eval_envs=40)
    state = train_prior(cfg, tmp_path / "run", progress=False)
    from pacplan.es.checkpoint import read_metrics
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    evals = [r for r in recs if "eval_cost" in r]
    assert [r["iteration"] for r in evals] == [1, 3]
    world = ToyWorld(dim=5)
    oracle = world.costs(state.mu[None].astype(np.float32), np.arange(5000, 5040)).mean()
    assert evals[-1]["eval_cost"] == pytest.approx(float(oracle), abs=1e-12)
