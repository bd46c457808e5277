"""A config is checked once, at the boundary (docs/design.md §2.2): `check_worlds` records on
the config what it checked, `run` trusts that and checks nothing twice, and a config changed
after the check (or never checked) is still refused before any work, with the same line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline import pipeline

BASE = {
    "name": "toy-boundary",
    "world": {"name": "toy", "options": {"dim": 4, "shift": 0.3}},
    "seeds": {"prior": [0, 60], "cert": [10_000, 10_040], "test": [20_000, 20_030]},
    "es": {"iterations": 2, "envs_per_iter": 4, "pairs_per_env": 2, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 4, "chunk_seeds": 20},
    "policies": {"m": 4, "seed": 3},
    "certificate": {"n": [40], "delta": 0.05},
    "baselines": [{"name": "zeros"}],
    "report": {"trajectories": 0},
}


def _checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The world names `pipeline` checks options of, as it checks them."""
    seen: list[str] = []
    real = pipeline.check_world_options

    def counting(name: str, options: dict) -> None:
        seen.append(name)
        real(name, options)

    monkeypatch.setattr(pipeline, "check_world_options", counting)
    return seen


def test_a_run_trusts_the_config_its_boundary_checked(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_config(BASE)
    seen = _checks(monkeypatch)
    pipeline.check_worlds(cfg)
    assert seen == ["toy", "toy"]  # the world and its baseline, once each
    result = pipeline.run(cfg, tmp_path / "run", progress=False)
    assert seen == ["toy", "toy"]  # nothing checked again
    assert sorted(result.certificates) == [40]


def test_an_unchecked_config_is_checked_by_run(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _checks(monkeypatch)
    pipeline.run(parse_config(BASE), tmp_path / "run", progress=False)
    assert seen == ["toy", "toy"]


def test_a_world_option_changed_after_the_check_is_refused_before_any_work(
        tmp_path: Path) -> None:
    cfg = parse_config(BASE)
    pipeline.check_worlds(cfg)
    cfg.baselines[0].world_options["no_such_option"] = 1
    with pytest.raises(PacplanError) as at_boundary:
        pipeline.check_worlds(parse_config(BASE | {"baselines": [
            {"name": "zeros", "world_options": {"no_such_option": 1}}]}))
    with pytest.raises(PacplanError) as in_run:
        pipeline.run(cfg, tmp_path / "run", progress=False)
    assert str(in_run.value) == str(at_boundary.value)
    assert "no_such_option" in str(in_run.value)
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(("content", "message"), [
    (None, "baseline 'fixed' weights: no such policy file"),
    (b"not weights", "baseline 'fixed' weights: "),
    (np.zeros(3, dtype=np.float32), "expected 4 toy weights, got shape (3,)"),
])
def test_a_bad_baseline_weights_file_is_refused_before_any_work(
        tmp_path: Path, content: object, message: str) -> None:
    """Baselines are flown last: a missing or wrong weights file was refused only after the
    prior, the policies and both cost matrices, leaving the run folder behind."""
    weights = tmp_path / "fixed.npy"
    if isinstance(content, bytes):
        weights.write_bytes(content)
    elif content is not None:
        np.save(weights, content)
    cfg = parse_config(BASE | {"baselines": [{"name": "fixed", "weights": str(weights)}]})
    with pytest.raises(PacplanError) as at_boundary:
        pipeline.check_worlds(cfg)
    assert message in str(at_boundary.value) and "\n" not in str(at_boundary.value)
    with pytest.raises(PacplanError) as in_run:
        pipeline.run(parse_config(BASE | {"baselines": [{"name": "fixed",
                                                           "weights": str(weights)}]}),
                     tmp_path / "run", progress=False)
    assert str(in_run.value) == str(at_boundary.value)
    assert not (tmp_path / "run").exists()
