"""A per-weight starting variance (`es.init_var` naming a file): the iterates start from exactly
those variances, the file counts by its content, and bad files or values are refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from safetensors.numpy import save_file

from pacplan.config import load_config, parse_config
from pacplan.errors import PacplanError
from pacplan.es import checkpoint
from pacplan.pipeline.prior.training import es_fingerprint, read_start_files, run_es
from pacplan.pipeline.rundir import RunDir
from pacplan.worlds.toy import ToyWorld

_SEEDS = {"prior": [0, 500], "cert": [1000, 2000], "test": [3000, 4000]}


def _paired(world: ToyWorld, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
    return np.stack([world.costs(thetas[i], seeds[i : i + 1])[0] for i in range(len(seeds))])


def _write_config(tmp_path: Path, init_var: object) -> Path:
    cfg = {"name": "t", "world": {"name": "toy", "options": {"dim": 5}}, "seeds": _SEEDS,
           "es": {"iterations": 3, "envs_per_iter": 4, "pairs_per_env": 2, "seed": 1,
                  "lr_logvar": 1e-9, "init_var": init_var}}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_a_variance_file_sets_each_weights_starting_sigma(tmp_path: Path) -> None:
    var = np.array([1e-4, 1e-2, 1.0, 4.0, 0.25], dtype=np.float32)
    save_file({"theta": var}, str(tmp_path / "var.safetensors"))
    cfg = load_config(_write_config(tmp_path, "var.safetensors"))  # relative to the config
    assert Path(cfg.es.init_var).is_absolute()
    world = ToyWorld(dim=5)
    run = tmp_path / "run"
    # one iteration with a vanishing log-variance rate: σ² is still the file's, to 1e-8
    run_es(cfg.es, world.dim, lambda th, sd: _paired(world, th, sd), tuple(cfg.seeds.prior),
           run_dir=run, fingerprint=es_fingerprint(cfg), stop_after=1)
    state = checkpoint.load_checkpoint(RunDir(run).checkpoint_files())
    assert state is not None and state.iteration == 1
    np.testing.assert_allclose(np.exp(state.logvar), var.astype(np.float64), rtol=1e-8)
    assert not np.allclose(np.exp(state.logvar), 4.0)  # not the scalar default


def test_the_file_counts_by_content_and_a_scalar_differs(tmp_path: Path) -> None:
    var = np.full(5, 0.01, dtype=np.float32)
    save_file({"theta": var}, str(tmp_path / "a.safetensors"))
    save_file({"theta": var}, str(tmp_path / "b.safetensors"))
    fa = es_fingerprint(load_config(_write_config(tmp_path, "a.safetensors")))
    fb = es_fingerprint(load_config(_write_config(tmp_path, "b.safetensors")))
    assert fa == fb  # same content, other path
    save_file({"theta": var * 2}, str(tmp_path / "b.safetensors"))
    assert es_fingerprint(load_config(_write_config(tmp_path, "b.safetensors"))) != fa
    assert es_fingerprint(load_config(_write_config(tmp_path, 0.01))) != fa


@pytest.mark.parametrize(("values", "message"), [
    (np.array([0.1, 0.1, -0.1, 0.1, 0.1]), "every variance must be > 0, found -0.1 at weight 2"),
    (np.array([0.1, 0.1, 0.1]), "expected 5 es.init_var weights"),
    (np.array([0.1, np.nan, 0.1, 0.1, 0.1]), "v.safetensors: contains NaN or infinity"),
])
def test_bad_variance_files_are_refused_naming_the_problem(tmp_path: Path, values: np.ndarray,
                                                           message: str) -> None:
    save_file({"theta": values.astype(np.float32)}, str(tmp_path / "v.safetensors"))
    cfg = load_config(_write_config(tmp_path, "v.safetensors"))
    world = ToyWorld(dim=5)
    with pytest.raises(PacplanError, match=message.replace("(", r"\(")):
        run_es(cfg.es, world.dim, lambda th, sd: _paired(world, th, sd), tuple(cfg.seeds.prior),
               run_dir=tmp_path / "run", fingerprint=es_fingerprint(cfg))


def test_a_missing_file_and_non_positive_scalars_are_refused(tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match=r"es\.init_var file not found"):
        es_fingerprint(load_config(_write_config(tmp_path, "missing.safetensors")))
    for bad in (0.0, -1.0):
        with pytest.raises(PacplanError, match="init_var must be > 0"):
            parse_config({"name": "t", "world": {"name": "toy"}, "es": {"init_var": bad}})


# ----------------------------------------------------------- checked before any stage runs

_UAV_DIM = 13_943
_DISTILLED = {
    "name": "taught", "world": {"name": "uav", "options": {"simulator": "batched",
                                                            "compile": False}},
    "seeds": {"prior": [0, 1000], "cert": [100_000, 100_100], "test": [200_000, 200_100]},
    "distill": {"envs": 2, "rounds": 0, "eval_envs": 0, "workers": 1},
    "es": {"iterations": 1, "envs_per_iter": 2, "pairs_per_env": 1, "init_var": "v.safetensors"},
    "executor": {"kind": "serial"}, "policies": {"m": 2}, "report": {"trajectories": 0},
}


def _bad_file(folder: Path, kind: str) -> None:
    """v.safetensors as `kind` says it is wrong (or no file at all)."""
    values = {"short": np.full(5, 0.01), "zero": np.r_[np.full(_UAV_DIM - 1, 0.01), 0.0],
              "inf": np.r_[np.full(_UAV_DIM - 1, 0.01), np.inf]}
    if kind == "garbage":
        (folder / "v.safetensors").write_bytes(b"not a safetensors file")
    elif kind in values:
        save_file({"theta": values[kind].astype(np.float32)}, str(folder / "v.safetensors"))


@pytest.fixture
def no_distillation(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Distillation as a stand-in that leaves what the real stage leaves (distill/theta), and
    the run folders it was called for: a bad init_var file must be refused before it."""
    from pacplan.io.files import safetensors_bytes
    from pacplan.pipeline.prior import distill

    called: list[Path] = []

    def fake(cfg: object, run_dir: str | Path, log: object = None) -> Path:
        called.append(Path(run_dir))
        out = Path(run_dir) / "distill" / "theta.safetensors"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(safetensors_bytes({"theta": np.zeros(_UAV_DIM, np.float32)}, {}))
        return out

    monkeypatch.setattr(distill, "distill", fake)
    return called


@pytest.mark.parametrize(("kind", "message"), [
    ("missing", "es.init_var file not found: "),
    ("garbage", "v.safetensors: unreadable safetensors file"),
    ("short", f"expected {_UAV_DIM} es.init_var weights, got shape (5,)"),
    ("zero", f"es.init_var: every variance must be > 0, found 0 at weight {_UAV_DIM - 1}"),
    ("inf", "v.safetensors: contains NaN or infinity"),
])
def test_a_bad_variance_file_is_refused_before_distillation(
        tmp_path: Path, kind: str, message: str, no_distillation: list[Path],
        capsys: pytest.CaptureFixture[str]) -> None:
    """A bad es.init_var file was refused only once ES started, after distillation had run
    (hours for the shipped priors) and left its run folder behind."""
    from helpers import cli
    from pacplan.pipeline.prior.training import train_prior

    _bad_file(tmp_path, kind)
    config = tmp_path / "taught.yaml"
    config.write_text(yaml.safe_dump(_DISTILLED))
    for command in ("train-prior", "run"):
        out = tmp_path / command
        code, _, err = cli([command, str(config), "--out", str(out), "--quiet"], capsys)
        assert code == 2 and message in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
        assert not out.exists()
    with pytest.raises(PacplanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        train_prior(load_config(config), tmp_path / "direct", progress=False)
    assert not (tmp_path / "direct").exists() and no_distillation == []


def test_a_run_resumes_with_the_same_variances_from_another_path(tmp_path: Path) -> None:
    """The variance file counts by its content (the ES fingerprint), not where it lives, as
    es.init_mean's does: a run moved with its config to another checkout resumes."""
    from pacplan.pipeline.pipeline import run

    var = np.full(5, 0.01, dtype=np.float32)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        save_file({"theta": var}, str(tmp_path / name / "v.safetensors"))

    def config(folder: str) -> dict:
        es = {"iterations": 2, "envs_per_iter": 2, "pairs_per_env": 1,
              "init_var": str(tmp_path / folder / "v.safetensors")}
        return {"name": "t", "world": {"name": "toy", "options": {"dim": 5}}, "seeds": _SEEDS,
                "es": es, "policies": {"m": 2}, "certificate": {"n": [20]}}

    first = run(parse_config(config("a")), tmp_path / "run", progress=False)
    again = run(parse_config(config("b")), tmp_path / "run", progress=False)
    assert again.certificates[20].certified == first.certificates[20].certified


def test_a_prior_file_starts_es_at_its_mean_and_variance(tmp_path: Path) -> None:
    """Fine-tuning a prior: es.init_mean and es.init_var both naming a prior file (mu, logvar)
    start ES at mu and exp(logvar), not at mu read as variances."""
    mu = np.array([0.5, -0.25, 1.0, 0.0, 2.0])
    logvar = np.log(np.array([1e-4, 4e-4, 1e-2, 1e-3, 2.5e-5]))
    checkpoint.save_prior(tmp_path / "p.safetensors", mu, logvar, iteration=7)
    path = _write_config(tmp_path, "p.safetensors")
    raw = yaml.safe_load(path.read_text())
    raw["es"]["init_mean"] = "p.safetensors"
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    files = read_start_files(cfg.es, 5)
    np.testing.assert_allclose(files["init_mean"], mu, rtol=1e-7)
    np.testing.assert_allclose(files["init_var"], np.exp(logvar), rtol=1e-12)
    with pytest.raises(PacplanError, match=r"p\.safetensors: expected 6 es\.init_var weights, "
                       r"got a prior of 5"):
        read_start_files(cfg.es.model_copy(update={"init_mean": 0.0}), 6)


def test_no_iterations_write_the_start_as_the_prior_to_the_bit(tmp_path: Path) -> None:
    """es.iterations 0 (a net a distill section taught, with a prior's σ): the prior file is the
    start, float64 weights as stored (not rounded to float32) and the prior's logvar."""
    mu = np.array([0.1, -1 / 3, np.pi, 1e-9, 2.0 / 7.0])  # none is a float32
    logvar = np.log(np.array([1e-4, 4e-4, 1e-2, 1e-3, 2.5e-5]))
    checkpoint.save_prior(tmp_path / "p.safetensors", mu, logvar, iteration=7)
    path = _write_config(tmp_path, "p.safetensors")
    raw = yaml.safe_load(path.read_text())
    raw["es"].update({"init_mean": "p.safetensors", "iterations": 0})
    path.write_text(yaml.safe_dump(raw))
    cfg = load_config(path)
    world = ToyWorld(dim=5)

    def never(thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        raise AssertionError("no rollout at 0 iterations")

    state = run_es(cfg.es, world.dim, never, tuple(cfg.seeds.prior), run_dir=tmp_path / "run",
                   fingerprint=es_fingerprint(cfg))
    assert state.iteration == 0
    got_mu, got_logvar = checkpoint.load_prior(tmp_path / "run" / RunDir.PRIOR)
    assert np.array_equal(got_mu, mu) and np.array_equal(got_logvar, logvar)
    assert not np.array_equal(mu.astype(np.float32).astype(np.float64), mu)  # would round
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [  # no empty tensorboard/
        "es_state.json", "es_state.safetensors", "prior.safetensors"]
