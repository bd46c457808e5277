"""ES prior training: gradients, utility switching, convergence on toy, determinism and resume."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from safetensors.numpy import load_file

from pacplan.config import ESConfig, RunConfig, dump_config, load_config, parse_config
from pacplan.errors import PacplanError
from pacplan.es import checkpoint
from pacplan.es.algorithm import es_gradients, rank_utilities, sample_envs
from pacplan.pipeline.prior.training import run_es, train_prior
from pacplan.pipeline.rundir import RunDir
from pacplan.presets import preset_path
from pacplan.worlds.toy import ToyWorld

REPO = Path(__file__).resolve().parents[2]


def load_checkpoint(run_dir: Path) -> object:
    return checkpoint.load_checkpoint(RunDir(run_dir).checkpoint_files())


def load_prior(run_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    return checkpoint.load_prior(RunDir(run_dir) / RunDir.PRIOR)


def read_metrics(run_dir: Path) -> list[dict]:
    return checkpoint.read_metrics(RunDir(run_dir) / RunDir.METRICS)


def _cfg(**es: object) -> RunConfig:
    base = {"iterations": 20, "envs_per_iter": 6, "pairs_per_env": 4, "lr_mu": 0.1,
            "lr_logvar": 0.1, "seed": 3}
    return parse_config({
        "name": "t",
        "world": {"name": "toy", "options": {"dim": 5}},
        "seeds": {"prior": [0, 500], "cert": [1000, 2000], "test": [3000, 4000]},
        "es": base | es,
    })


def _without_seconds(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def _assert_same_state(a: Path, b: Path) -> None:
    sa, sb = load_file(str(a / "es_state.safetensors")), load_file(str(b / "es_state.safetensors"))
    assert sa.keys() == sb.keys()
    for k in sa:
        assert np.array_equal(sa[k], sb[k]), k
    assert _without_seconds(read_metrics(a)) == _without_seconds(read_metrics(b))


# -- building blocks ------------------------------------------------------------------------------
def test_rank_utilities_properties() -> None:
    costs = np.array([[0.3, 0.1, 0.9, 0.5, 0.2, 0.7], [0.5] * 6])
    u = rank_utilities(costs)
    assert np.allclose(u.sum(axis=1), 0.0)
    assert np.argmax(u[0]) == 1  # the lowest cost gets the largest utility
    order = np.argsort(costs[0])
    assert np.all(np.diff(u[0][order]) <= 0)  # utility never rises with cost
    assert np.array_equal(u[1], np.zeros(6))  # flat: no signal
    tied = rank_utilities(np.array([[0.1, 0.1, 0.5, 0.9]]))[0]
    assert tied[0] == tied[1] > tied[2] >= tied[3]


def test_gradients_match_analytic_expectations() -> None:
    """For f(θ) = Σ θ² : ∇_mu E f = 2 mu and ∇_logvar E f = σ² (closed form, not ES)."""
    rng = np.random.default_rng(0)
    d, n, m = 3, 50, 4000
    mu = np.array([1.0, -0.5, 0.25])
    logvar = np.log(np.array([0.5, 1.0, 0.2]))
    sigma = np.exp(0.5 * logvar)
    eps = rng.standard_normal((n, m, d))
    fp = np.sum((mu + sigma * eps) ** 2, axis=-1)
    fm = np.sum((mu - sigma * eps) ** 2, axis=-1)
    g_mu, g_lv = es_gradients(eps, fp, fm, sigma)
    assert np.allclose(g_mu, 2 * mu, atol=0.02)
    assert np.allclose(g_lv, sigma**2, atol=0.03)


def test_linear_cost_has_no_variance_gradient_and_exact_mean_gradient() -> None:
    """Antithetic pairs make a linear cost's mu-gradient exact: a / 1 whatever the noise."""
    rng = np.random.default_rng(1)
    a = np.array([0.3, -1.0])
    sigma = np.array([0.7, 1.3])
    eps = rng.standard_normal((4, 2000, 2))
    mu = np.zeros(2)
    fp, fm = (mu + sigma * eps) @ a, (mu - sigma * eps) @ a
    g_mu, g_lv = es_gradients(eps, fp, fm, sigma)
    assert np.allclose(g_lv, 0.0)
    assert np.allclose(g_mu, a, atol=0.05)


def test_sample_envs_distinct_in_range_and_all_when_small() -> None:
    rng = np.random.default_rng(0)
    s = sample_envs(rng, (100, 200), 30)
    assert len(set(s.tolist())) == 30 and s.min() >= 100 and s.max() < 200
    assert np.array_equal(sample_envs(rng, (5, 9), 10), np.arange(5, 9))


# -- utility switching ----------------------------------------------------------------------------
def test_utility_switch_follows_the_plateau_rule() -> None:
    """Scripted training costs: improve, stall (switch on after patience), improve (switch off)."""
    levels = [0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.5, 0.5, 0.5, 0.5, 0.4]
    calls = {"t": 0}

    def cost_fn(thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        lvl = levels[calls["t"]]
        calls["t"] += 1
        return lvl + 0.01 * np.tanh(thetas[..., 0].astype(np.float64))

    cfg = ESConfig(iterations=len(levels), envs_per_iter=3, pairs_per_env=4,
                   utility_patience=3, min_improvement=0.02, seed=0)
    seen: list[dict] = []
    run_es(cfg, 2, cost_fn, (0, 100), on_iteration=lambda s, r: seen.append(r))
    flags = [r["utility"] for r in seen]
    # stall counts: 0 0 0 1 2 3 4 5 0 1 2 3 0 -> on where stall >= 3
    assert flags == [False, False, False, False, False, True, True, True,
                     False, False, False, True, False]
    assert [r["stall"] for r in seen] == [0, 0, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 0]


def test_plateau_on_toy_switches_utility_on(tmp_path: Path) -> None:
    """Far from the goal the toy cost is exactly 1: no progress, utility on after patience."""
    cfg = _cfg(iterations=8, init_mean=60.0, init_var=0.01, utility_patience=3)
    train_prior(cfg, tmp_path, progress=False)
    recs = read_metrics(tmp_path)
    assert all(r["cost"] == 1.0 for r in recs)
    assert [r["utility"] for r in recs] == [False] * 3 + [True] * 5


# -- end to end on toy ----------------------------------------------------------------------------
def test_es_reaches_the_known_optimum_of_toy(tmp_path: Path) -> None:
    """The toy preset: mu within 0.2 of the target in every coordinate (RMS error < 0.1), and
    the prior's expected cost (closed-form oracle) within 0.025 of its infimum, from 0.95 at
    N(0, 4I). (Seeds 0-4 of this config reach max error <= 0.13 and gap <= 0.015.)"""
    cfg = load_config(preset_path("toy"))
    state = train_prior(cfg, tmp_path, progress=False)
    world = ToyWorld(**cfg.world.options)
    start = world.expected_cost(np.zeros(world.dim), cfg.es.init_var)
    final = world.expected_cost(state.mu, state.sigma**2)
    assert start > 0.9
    err = state.mu - world.optimum()
    assert np.max(np.abs(err)) < 0.2
    assert np.sqrt(np.mean(err**2)) < 0.1
    assert final - world.min_expected_cost() < 0.025
    # Artifacts: prior, checkpoint, metrics per iteration, frozen config, training curve.
    mu, logvar = load_prior(tmp_path)
    assert np.array_equal(mu, state.mu) and np.array_equal(logvar, state.logvar)
    recs = read_metrics(tmp_path)
    assert [r["iteration"] for r in recs] == list(range(cfg.es.iterations))
    assert {"cost", "best", "sigma_mean", "grad_mu_norm", "utility", "seconds"} <= recs[0].keys()
    assert load_config(tmp_path / "config.yaml") == cfg
    png = (tmp_path / "figures" / "prior_training.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    info = json.loads((tmp_path / "es_state.json").read_text())
    assert info["iteration"] == cfg.es.iterations


def test_same_config_same_prior_and_seed_matters(tmp_path: Path) -> None:
    a = train_prior(_cfg(), tmp_path / "a", progress=False)
    b = train_prior(_cfg(), tmp_path / "b", progress=False)
    c = train_prior(_cfg(seed=4), tmp_path / "c", progress=False)
    assert np.array_equal(a.mu, b.mu) and np.array_equal(a.logvar, b.logvar)
    assert not np.array_equal(a.mu, c.mu)


def test_interrupt_and_resume_is_bit_identical(tmp_path: Path) -> None:
    cfg = _cfg(iterations=15, utility_patience=2)
    train_prior(cfg, tmp_path / "full", progress=False)
    part = train_prior(cfg, tmp_path / "part", progress=False, stop_after=6)
    assert part.iteration == 6
    assert len(read_metrics(tmp_path / "part")) == 6
    # A metrics line written just before a crash (checkpoint not yet replaced) is dropped.
    # So is a line cut short, and a prior.safetensors older than the state is re-derived.
    with open(tmp_path / "part" / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps({"iteration": 6, "cost": -1}) + "\n" + '{"iteration": 7, "co')
    (tmp_path / "part" / "prior.safetensors").unlink()
    train_prior(cfg, tmp_path / "part", progress=False)
    assert np.array_equal(load_prior(tmp_path / "part")[0], load_prior(tmp_path / "full")[0])
    _assert_same_state(tmp_path / "full", tmp_path / "part")


def test_more_iterations_extend_an_existing_run(tmp_path: Path) -> None:
    train_prior(_cfg(iterations=12), tmp_path / "full", progress=False)
    train_prior(_cfg(iterations=5), tmp_path / "ext", progress=False)
    train_prior(_cfg(iterations=12), tmp_path / "ext", progress=False)
    _assert_same_state(tmp_path / "full", tmp_path / "ext")


def test_resume_with_a_changed_config_is_refused(tmp_path: Path) -> None:
    train_prior(_cfg(iterations=3), tmp_path, progress=False)
    with pytest.raises(PacplanError, match="different config"):
        train_prior(_cfg(iterations=3, lr_mu=0.2), tmp_path, progress=False)


def test_checkpoint_round_trip(tmp_path: Path) -> None:
    state = train_prior(_cfg(iterations=4), tmp_path, progress=False)
    back = load_checkpoint(tmp_path)
    assert back is not None and back.iteration == 4
    assert np.array_equal(back.mu, state.mu) and back.best_cost == state.best_cost
    assert back.stall == state.stall and back.utility == state.utility
    # No temporary files are left behind by the atomic writes.
    assert not [p for p in tmp_path.iterdir() if ".tmp" in p.name]


def test_progress_bar_runs(tmp_path: Path) -> None:
    state = train_prior(_cfg(iterations=3), tmp_path, progress=True)
    assert state.iteration == 3


def test_init_mean_length_checked(tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match="init_mean"):
        train_prior(_cfg(init_mean=[0.0, 1.0]), tmp_path, progress=False)


@pytest.mark.kernel_free  # a kill and a resume on one machine
def test_sigkill_mid_run_then_resume_matches_uninterrupted(tmp_path: Path) -> None:
    """Really kill `pacplan train-prior` with SIGKILL mid-run, resume, compare bit for bit."""
    data = yaml.safe_load(preset_path("toy").read_text())
    data["world"]["options"] = {"dim": 6, "work": 400}  # slow rollouts: ~40 ms per iteration
    data["es"].update(iterations=30, envs_per_iter=4, pairs_per_env=4)
    cfg = parse_config(data)
    cfg_path = tmp_path / "cfg.yaml"
    dump_config(cfg, cfg_path)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pacplan.cli", "train-prior", str(cfg_path), "--out", str(killed),
         "--quiet"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    state_json = killed / "es_state.json"
    deadline = time.time() + 60
    it = 0
    while time.time() < deadline and proc.poll() is None:
        if state_json.exists():
            it = json.loads(state_json.read_text())["iteration"]
            if it >= 3:
                break
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
    done = load_checkpoint(killed)
    assert done is not None and 3 <= done.iteration < 30
    train_prior(cfg, killed, progress=False)
    train_prior(cfg, tmp_path / "clean", progress=False)
    _assert_same_state(tmp_path / "clean", killed)
    assert len(read_metrics(killed)) == 30


def test_cli_reports_user_errors_in_one_line(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pacplan.cli", "train-prior", "toy",
         "--out", str(tmp_path), "--executor", "gpu"],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 2
    assert "unknown --executor 'gpu'" in out.stderr  # the command's own spelling
    assert "Traceback" not in out.stderr


def test_run_es_on_a_plain_cost_function_lowers_the_oracle_cost(tmp_path: Path) -> None:
    """run_es needs no world or executor: any paired cost function; checked with the oracle."""
    cfg = _cfg(iterations=40)
    seen: list[float] = []
    world = ToyWorld(dim=5)

    def cb_cost(state: object, rec: dict) -> None:
        seen.append(world.expected_cost(state.mu, state.sigma**2))  # type: ignore[attr-defined]

    run_es(cfg.es, 5, lambda th, s: _paired(world, th, s), (0, 500), on_iteration=cb_cost)
    assert seen[-1] < seen[0] - 0.2
    assert math.isfinite(seen[-1])


def _paired(world: ToyWorld, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    return np.stack([world.costs(thetas[i], seeds[i : i + 1])[0] for i in range(len(seeds))])


# -- shared perturbations (common random numbers across environments) ---------------------------
def test_shared_gradient_equals_paired_formula_with_repeated_eps() -> None:
    """Averaging fitness over environments first is the paired estimator with ε repeated."""
    rng = np.random.default_rng(0)
    n, m, d = 5, 3, 4
    eps1 = rng.standard_normal((1, m, d))
    f_plus, f_minus = rng.random((n, m)), rng.random((n, m))
    sigma = rng.uniform(0.5, 2.0, d)
    paired = es_gradients(np.repeat(eps1, n, axis=0), f_plus, f_minus, sigma)
    shared = es_gradients(eps1, f_plus.mean(0, keepdims=True), f_minus.mean(0, keepdims=True),
                          sigma)
    for a, b in zip(paired, shared):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)


def test_shared_perturbations_fly_one_matrix_and_reach_the_toy_optimum(tmp_path: Path) -> None:
    cfg = load_config(preset_path("toy"))
    cfg.es.shared_perturbations = True
    calls: list[tuple[int, ...]] = []

    from pacplan.pipeline.execution.executors import SerialExecutor

    class Recording(SerialExecutor):
        def cost_matrix(self, spec, thetas, seeds):
            calls.append(np.shape(thetas))
            return super().cost_matrix(spec, thetas, seeds)

        def paired_costs(self, spec, thetas, seeds):  # pragma: no cover - must not be used
            raise AssertionError("shared perturbations must not fly per-environment pairs")

    state = train_prior(cfg, tmp_path, executor=Recording(), progress=False)
    assert calls and all(c == (2 * cfg.es.pairs_per_env, 8) for c in calls)
    world = ToyWorld(**cfg.world.options)
    assert world.expected_cost(state.mu, state.sigma**2) - world.min_expected_cost() < 0.03


def test_init_mean_from_a_weights_file(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    start = np.arange(5, dtype=np.float32) / 10
    save_file({"theta": start}, str(tmp_path / "start.safetensors"))
    cfg = _cfg(iterations=1, init_mean=str(tmp_path / "start.safetensors"))
    first = train_prior(cfg, tmp_path / "run0", progress=False)
    from pacplan.es.algorithm import init_state

    np.testing.assert_array_equal(init_state(cfg.es, 5, mean=start).mu, start.astype(np.float64))
    # the first iteration started from the file's weights (iteration 0 is the best so far)
    np.testing.assert_array_equal(first.best_mu, start.astype(np.float64))
    train_prior(cfg, tmp_path / "run", progress=False)
    # A relative path in a YAML file is taken relative to that file.
    data = yaml.safe_load(yaml.safe_dump(cfg.model_dump(mode="json")))
    data["es"]["init_mean"] = "start.safetensors"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    assert load_config(tmp_path / "c.yaml").es.init_mean == str(tmp_path / "start.safetensors")
    # The run is tied to the file's content: a changed file is a different config.
    save_file({"theta": start + 1}, str(tmp_path / "start.safetensors"))
    with pytest.raises(PacplanError, match="different config"):
        train_prior(cfg, tmp_path / "run", progress=False)
    with pytest.raises(PacplanError, match="init_mean file not found"):
        train_prior(_cfg(init_mean=str(tmp_path / "nope.npy")), tmp_path / "x", progress=False)
    np.save(tmp_path / "short.npy", np.zeros(3))
    with pytest.raises(PacplanError, match="expected 5"):
        train_prior(_cfg(init_mean=str(tmp_path / "short.npy")), tmp_path / "y", progress=False)


# -- the checkpoint and the prior file are checked when read ---------------------------------------
def _rewrite_safetensors(path: Path, change) -> None:
    """Edit one tensor of a safetensors file the way a user (or a bit flip) would, keeping its
    metadata."""
    from safetensors import safe_open
    from safetensors.numpy import save_file

    with safe_open(str(path), framework="numpy") as fh:
        meta = fh.metadata()
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 - not a dict
    change(tensors)
    save_file(tensors, str(path), metadata=meta)


def test_an_edited_checkpoint_is_named_not_resumed(tmp_path: Path) -> None:
    """Editing mu in es_state.safetensors used to change the resumed prior silently."""
    cfg = _cfg(iterations=6)
    train_prior(cfg, tmp_path, progress=False, stop_after=3)
    state = tmp_path / "es_state.safetensors"

    def shift_mu(t: dict) -> None:
        t["mu"] = t["mu"] + 0.5

    _rewrite_safetensors(state, shift_mu)
    with pytest.raises(PacplanError, match=r"es_state\.safetensors.*(changed|corrupted).*delete"
                       ) as err:
        train_prior(cfg, tmp_path, progress=False)
    assert "\n" not in str(err.value)
    state.unlink()  # the advice: delete it to train again
    train_prior(cfg, tmp_path, progress=False)
    train_prior(cfg, tmp_path / "clean", progress=False)
    _assert_same_state(tmp_path / "clean", tmp_path)


def test_a_checkpoint_without_its_checksum_is_refused(tmp_path: Path) -> None:
    train_prior(_cfg(iterations=2), tmp_path, progress=False)
    from safetensors import safe_open
    from safetensors.numpy import save_file

    path = tmp_path / "es_state.safetensors"
    with safe_open(str(path), framework="numpy") as fh:
        meta = {k: v for k, v in (fh.metadata() or {}).items() if k == "es"}
        tensors = {k: fh.get_tensor(k) for k in fh.keys()}  # noqa: SIM118 - not a dict
    save_file(tensors, str(path), metadata=meta)
    with pytest.raises(PacplanError, match=r"es_state\.safetensors.*checksum"):
        train_prior(_cfg(iterations=3), tmp_path, progress=False)


def test_es_prior_records_its_training_seeds(tmp_path: Path) -> None:
    train_prior(_cfg(iterations=2), tmp_path, progress=False)
    assert checkpoint.load_prior_seeds(tmp_path / "prior.safetensors") == (0, 500)


def _prior_file(path: Path, mu: np.ndarray, logvar: np.ndarray, **meta: str) -> Path:
    from safetensors.numpy import save_file

    save_file({"mu": mu, "logvar": logvar}, str(path), metadata=meta or None)
    return path


@pytest.mark.parametrize(("mu", "logvar", "words"), [
    (np.zeros((2, 4)), np.zeros(8), r"mu.*1-D"),
    (np.array([0.0, np.nan, 1.0]), np.zeros(3), r"mu.*not finite"),
    (np.zeros(3), np.array([0.0, np.inf, 1.0]), r"logvar.*not finite"),
    (np.zeros(8), np.zeros(7), r"logvar has 7 .*mu has 8"),
    (np.zeros(3), np.full(3, 2000.0), r"logvar.*too large"),
    (np.zeros(0), np.zeros(0), r"mu.*empty"),
])
def test_a_malformed_prior_names_the_file_and_the_tensor(tmp_path: Path, mu: np.ndarray,
                                                         logvar: np.ndarray, words: str) -> None:
    path = _prior_file(tmp_path / "bad.safetensors", mu, logvar)
    with pytest.raises(PacplanError, match=rf"bad\.safetensors.*{words}") as err:
        checkpoint.load_prior(path)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("seeds", ["[0]", "[5, 1]", "zero", "[0, 1.5]", "[-1, 3]", "[true, 4]"])
def test_malformed_recorded_seeds_are_named(tmp_path: Path, seeds: str) -> None:
    path = _prior_file(tmp_path / "p.safetensors", np.zeros(3), np.zeros(3), prior_seeds=seeds)
    with pytest.raises(PacplanError, match=r"p\.safetensors.*prior_seeds"):
        checkpoint.load_prior_seeds(path)
