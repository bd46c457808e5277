"""Run configuration: presets load, typos and inconsistent seed ranges are one-line user errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pacplan.config import RunConfig, dump_config, load_config, parse_config
from pacplan.errors import PacplanError

REPO = Path(__file__).resolve().parents[1]


def _base() -> dict:
    return {"name": "t", "world": {"name": "toy", "options": {"dim": 3}}}


def test_toy_preset_loads_with_expected_values() -> None:
    cfg = load_config(REPO / "configs" / "toy.yaml")
    assert cfg.world.name == "toy"
    assert cfg.es.init_var == 4.0 and cfg.es.init_mean == 0.0
    assert cfg.seeds.prior == (0, 2000)
    assert cfg.executor.kind == "serial"
    assert cfg.certificate.delta == 0.01 and cfg.certificate.solver == "gibbs"


def test_defaults_are_filled_in() -> None:
    cfg = parse_config(_base())
    assert cfg.es.init_var == 4.0
    assert cfg.policies.m == 50
    assert cfg.certificate.bound == "best"
    assert cfg.executor.kind == "serial"


def test_dump_and_load_round_trip(tmp_path: Path) -> None:
    data = _base() | {"es": {"iterations": 7, "init_mean": [0.1, 0.2, 0.3]},
                      "executor": {"kind": "ray", "address": "auto"}}
    cfg = parse_config(data)
    dump_config(cfg, tmp_path / "c.yaml")
    again = load_config(tmp_path / "c.yaml")
    assert again == cfg
    assert isinstance(again, RunConfig)


@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"es": {"lr_mu": 0}}, "es.lr_mu"),
        ({"es": {"iteratons": 5}}, "es.iteratons: unknown field"),
        ({"colour": "red"}, "colour: unknown field"),
        ({"executor": {"kind": "gpu"}}, "executor.kind"),
        ({"seeds": {"prior": [5, 5]}}, "seeds.prior"),
        ({"seeds": {"prior": [0, 100], "cert": [50, 200], "test": [300, 400]}},
         "overlap: prior [0, 100) and cert [50, 200)"),
        ({"seeds": {"prior": [0, 10], "cert": [10, 20], "test": [15, 30]}},
         "cert [10, 20) and test"),
        ({"certificate": {"delta": 1.5}}, "certificate.delta"),
        ({"certificate": {"n": [5000]}, "seeds": {"cert": [10**6, 10**6 + 100]}},
         "certificate.n [5000] exceeds the 100 seeds"),
        ({"es": {"logvar_min": 3, "logvar_max": 1}}, "logvar_min"),
    ],
)
def test_invalid_configs_name_the_field(patch: dict, fragment: str) -> None:
    data = _base() | patch
    with pytest.raises(PacplanError) as info:
        parse_config(data, source="x.yaml")
    msg = str(info.value)
    assert fragment in msg
    assert msg.startswith("x.yaml: invalid config")
    assert "\n" not in msg


def test_adjacent_ranges_are_disjoint() -> None:
    cfg = parse_config(_base() | {"seeds": {"prior": [0, 10], "cert": [10, 20], "test": [20, 30]}})
    assert cfg.seeds.cert == (10, 20)


def test_missing_file_bad_yaml_and_non_mapping(tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match="not found"):
        load_config(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(PacplanError, match="not valid YAML"):
        load_config(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- a\n- b\n")
    with pytest.raises(PacplanError, match="mapping"):
        load_config(lst)


def test_yaml_python_tags_are_refused(tmp_path: Path) -> None:
    """safe_load: a config can never construct Python objects."""
    evil = tmp_path / "evil.yaml"
    evil.write_text("name: !!python/object/apply:os.getcwd []\nworld: {name: toy}\n")
    with pytest.raises(PacplanError, match="not valid YAML"):
        load_config(evil)
    assert yaml.safe_load("a: 1") == {"a": 1}


def test_certificate_n_defaults_to_the_whole_cert_range() -> None:
    cfg = parse_config(_base() | {"seeds": {"prior": [0, 10], "cert": [10, 35], "test": [40, 50]}})
    assert cfg.certificate.n == [25]


def test_every_shipped_preset_loads() -> None:
    """Each configs/*.yaml is a valid RunConfig with disjoint seed ranges."""
    presets = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))
    assert {p.stem for p in presets} >= {"toy", "uav-quick", "uav-paper", "quadruped-quick",
                                          "quadruped-hard", "quadruped-paper"}
    for p in presets:
        cfg = load_config(p)
        assert cfg.name == p.stem
        # every file a preset names is shipped with it
        files = [cfg.prior, *(b.weights for b in cfg.baselines)]
        if isinstance(cfg.es.init_mean, str):
            files.append(cfg.es.init_mean)
        for f in files:
            assert f is None or Path(f).is_file(), f"{p.name} names a missing file {f}"
