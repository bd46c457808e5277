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
from pacplan.run.rundir import RunDir
from pacplan.run.training import es_fingerprint, run_es
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
