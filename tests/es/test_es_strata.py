"""Stratified ES draws (`es.strata`): the importance-weighted cost estimates the world's
expected cost as plain draws do (and the unweighted one is detectably biased), bad strata are
refused in one line before any rollout, and a stratified run killed mid-way resumes exactly."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pacplan.config import RunConfig, parse_config
from pacplan.errors import PacplanError
from pacplan.es import checkpoint
from pacplan.es.algorithm import ask, init_state, tell
from pacplan.es.strata import REST, plan_strata
from pacplan.pipeline.prior.training import es_fingerprint, run_es, train_prior
from pacplan.pipeline.rundir import RunDir
from pacplan.worlds.base import stratum_members, world_strata
from pacplan.worlds.toy import ToyWorld

RANGE = (0, 3000)


def _cfg(world: dict | None = None, **es: object) -> RunConfig:
    base = {"iterations": 4, "envs_per_iter": 12, "pairs_per_env": 2, "seed": 5,
            "strata": {"far": {"share": 0.5}}}
    return parse_config({
        "name": "t",
        "world": world or {"name": "toy", "options": {"dim": 4}},
        "seeds": {"prior": list(RANGE), "cert": [10000, 10100], "test": [20000, 20100]},
        "es": base | es,
    })


def test_the_toy_world_names_a_stratum_of_about_one_in_six_seeds() -> None:
    world = ToyWorld(dim=4)
    assert set(world_strata(world)) == {"far"}
    seeds = np.arange(*RANGE)
    far = stratum_members(world, "far", seeds)
    goals = np.array([world.goal(int(s))[0] for s in seeds]) - world.target[0]
    np.testing.assert_array_equal(far, goals > world.shift)
    assert 0.13 < far.mean() < 0.19  # P(z > 1) = 0.159


def test_weighted_stratified_cost_is_unbiased_and_unweighted_is_not() -> None:
    """Over 1000 iterations' draws of a fixed policy (σ ≈ 0), the mean of the logged (weighted)
    training cost matches the brute-force mean over the whole seed range within 4 standard
    errors; the plain mean of the same stratified draws misses it by many. (A stratum weight 20 %
    off, 1.2 p / share, moves the weighted mean by about 8 standard errors.)"""
    world = ToyWorld(dim=1, shift=1.0, scale=1.0)  # the far goals cost 0.85, the rest 0.34
    cfg = _cfg(init_var=1e-12, init_mean=-1.0).es
    plan = plan_strata(cfg.strata, cfg.envs_per_iter, world, RANGE)
    assert plan.counts == (6, 6) and plan.exact
    state = init_state(cfg, 1)
    truth = float(world.costs(state.mu[None].astype(np.float32), np.arange(*RANGE)).mean())
    weighted, plain = [], []
    for t in range(1000):
        state.iteration = t
        asked = ask(state, cfg, RANGE, plan)
        _, record = tell(state, cfg, asked, world.costs(asked.thetas[0], asked.seeds))
        weighted.append(record["cost"])
        plain.append(record["cost_plain"])
        assert record["strata"]["far"]["envs"] == 6 and record["strata"][REST]["envs"] == 6
    w, p = np.array(weighted), np.array(plain)
    se_w, se_p = w.std(ddof=1) / math.sqrt(w.size), p.std(ddof=1) / math.sqrt(p.size)
    assert abs(w.mean() - truth) < 4 * se_w, (w.mean(), truth, se_w)
    assert abs(p.mean() - truth) > 10 * se_p, (p.mean(), truth, se_p)


def test_stratified_draws_are_distinct_uniform_cells_and_weights_match_probabilities() -> None:
    world = ToyWorld(dim=4)
    cfg = _cfg().es
    plan = plan_strata(cfg.strata, cfg.envs_per_iter, world, RANGE)
    far = stratum_members(world, "far", np.arange(*RANGE))
    p = float(far.mean())
    np.testing.assert_allclose(plan.probabilities, [p, 1 - p])
    np.testing.assert_allclose(plan.weights, [p / 0.5, (1 - p) / 0.5])
    seeds, weights = plan.sample(np.random.default_rng(0), RANGE)
    assert np.unique(seeds).size == 12 and np.all(np.diff(seeds) > 0)
    inside = far[seeds - RANGE[0]]
    assert inside.sum() == 6
    np.testing.assert_allclose(weights[inside], p / 0.5)
    np.testing.assert_allclose(weights[~inside], (1 - p) / 0.5)


def test_a_large_range_is_sampled_by_rejection_with_the_same_guarantees() -> None:
    world = ToyWorld(dim=4)
    big = (0, 10**9)
    plan = plan_strata(_cfg().es.strata, 12, world, big)
    assert not plan.exact and plan.members is None and plan.counted == 200_000
    assert abs(plan.probabilities[0] - 0.1587) < 0.005  # P(z > 1), from the fixed sample
    seeds, _ = plan.sample(np.random.default_rng(1), big)
    assert np.unique(seeds).size == 12
    assert stratum_members(world, "far", seeds).sum() == 6


@pytest.mark.parametrize(("world", "es", "message"), [
    (None, {"strata": {"steep": {"share": 0.3}}},
     r"^es\.strata: unknown stratum 'steep'; world 'toy' names: far$"),
    ({"name": "toy", "options": {"dim": 4, "shift": 0.0}}, {},
     r"^es\.strata: no seed of seeds\.prior \[0, 3000\) lies in stratum 'far' "),
    (None, {"envs_per_iter": 12, "strata": {"far": {"share": 0.02}}},
     r"^es\.strata\.far: share 0\.02 of es\.envs_per_iter 12 draws no environment"),
    (None, {"envs_per_iter": 4, "strata": {"far": {"share": 0.9}}},
     r"^es\.strata: the shares draw all 4 environments of an iteration"),
])
def test_bad_strata_are_refused_in_one_line_before_any_rollout(
        tmp_path: Path, world: dict | None, es: dict, message: str) -> None:
    cfg = _cfg(world, **es)
    with pytest.raises(PacplanError, match=message) as err:
        train_prior(cfg, tmp_path / "run", progress=False)
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()  # refused before the run directory, let alone ES


def test_a_stratum_with_fewer_seeds_than_its_draws_is_refused() -> None:
    with pytest.raises(PacplanError, match=r"^es\.strata: stratum 'far' .* holds \d seeds of "
                       r"seeds\.prior \[0, 20\), fewer than the 6 environments") as err:
        plan_strata(_cfg().es.strata, 12, ToyWorld(dim=4), (0, 20))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("strata", "message"), [
    ({"far": {"share": 0.0}}, r"es\.strata\.far\.share: Input should be greater than 0"),
    ({"far": {"share": 1.0}}, r"es\.strata\.far\.share: Input should be less than 1"),
    ({"far": {"share": 0.6}, "near": {"share": 0.5}}, r"the shares sum to 1\.1"),
    ({}, r"strata: name at least one stratum"),
    ({"far": {"share": 0.3, "weight": 2.0}}, r"es\.strata\.far\.weight: unknown field"),
])
def test_bad_shares_are_refused_by_the_config_in_one_line(strata: dict, message: str) -> None:
    with pytest.raises(PacplanError, match=message) as err:
        _cfg(strata=strata)
    assert "\n" not in str(err.value)


def test_strata_change_the_fingerprint_and_their_absence_keeps_old_ones() -> None:
    plain = _cfg(strata=None)
    assert "strata" not in plain.es.model_dump(exclude_defaults=True)
    assert es_fingerprint(plain) != es_fingerprint(_cfg())
    assert es_fingerprint(_cfg()) != es_fingerprint(_cfg(strata={"far": {"share": 0.25}}))


def test_a_killed_stratified_run_resumes_bit_for_bit(tmp_path: Path) -> None:
    world = ToyWorld(dim=4)
    cfg = _cfg(iterations=6)
    plan = plan_strata(cfg.es.strata, cfg.es.envs_per_iter, world, RANGE)

    def costs(thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        return np.stack([world.costs(thetas[i], seeds[i:i + 1])[0] for i in range(len(seeds))])

    def go(out: Path, stop: int | None = None) -> None:
        run_es(cfg.es, 4, costs, RANGE, out, fingerprint=es_fingerprint(cfg), stop_after=stop,
               strata=plan)

    go(tmp_path / "clean")
    go(tmp_path / "cut", stop=2)
    go(tmp_path / "cut")
    a = checkpoint.load_checkpoint(RunDir(tmp_path / "clean").checkpoint_files())
    b = checkpoint.load_checkpoint(RunDir(tmp_path / "cut").checkpoint_files())
    assert a is not None and b is not None and a.iteration == b.iteration == 6
    np.testing.assert_array_equal(a.mu, b.mu)
    np.testing.assert_array_equal(a.logvar, b.logvar)
    assert a.extra["strata"]["cells"]["far"]["envs"] == 6
    ma = checkpoint.read_metrics(RunDir(tmp_path / "clean") / RunDir.METRICS)
    mb = checkpoint.read_metrics(RunDir(tmp_path / "cut") / RunDir.METRICS)
    assert [r["cost"] for r in ma] == [r["cost"] for r in mb]
    assert all(r["cost"] != r["cost_plain"] for r in ma)
    from pacplan.report.prior import _es_record_summary

    assert "importance-weighted mean" in _es_record_summary(ma, {})


def test_run_es_refuses_strata_without_their_plan(tmp_path: Path) -> None:
    cfg = _cfg()
    with pytest.raises(PacplanError, match=r"es\.strata is set: pass its plan"):
        run_es(cfg.es, 4, lambda th, sd: np.zeros(th.shape[:2]), RANGE, tmp_path / "r")


@pytest.mark.parametrize("command", ["train-prior", "run"])
def test_the_cli_refuses_an_unknown_stratum_in_one_line(
        tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    from helpers import cli

    cfg = _cfg(strata={"steep": {"share": 0.3}}).model_dump(mode="json")
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "out"
    code, _, err = cli([command, str(path), "--out", str(out), "--quiet"], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "unknown stratum 'steep'; world 'toy' names: far" in err
    assert not out.exists()
