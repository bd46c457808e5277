"""Run configuration: presets load, typos and inconsistent seed ranges are one-line user errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pacplan.config import RunConfig, dump_config, load_config, parse_config
from pacplan.errors import PacplanError
from pacplan.presets import list_presets, preset_path

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[2]


def _base() -> dict:
    return {"name": "t", "world": {"name": "toy", "options": {"dim": 3}}}


def test_toy_preset_loads_with_expected_values() -> None:
    cfg = load_config(preset_path("toy"))
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
        ({"seeds": {"prior_eval": [300_000, 300_100]}, "distill": {"eval_envs": 101}},
         "distill.eval_envs 101 exceeds the 100 seeds of seeds.prior_eval [300000, 300100]"),
        ({"seeds": {"prior_eval": [300_000, 300_100]}, "distill": {}},  # the default 500
         "distill.eval_envs 500 exceeds the 100 seeds"),
        ({"distill": {}, "es": {"init_mean": "start.safetensors"}},
         "es.init_mean is never used with a distill section"),
        ({"distill": {}, "es": {"init_mean": [0.1, 0.2]}},
         "es.init_mean is never used with a distill section"),
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


def test_distill_held_out_environments_within_prior_eval_load() -> None:
    seeds = {"prior_eval": [300_000, 300_100]}
    for distill in ({"eval_envs": 100}, {"eval_envs": 0}):
        parse_config(_base() | {"seeds": seeds, "distill": distill})
    parse_config(_base() | {"distill": {}})  # no prior_eval: nothing is flown held out
    parse_config(_base() | {"distill": {}, "es": {"init_mean": 0.0, "init_var": "v.npy"}})


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
    """Each shipped preset (and prior-training config) is a valid RunConfig with disjoint seed
    ranges, named like its file."""
    presets = [p.path for p in list_presets()]
    assert {p.stem for p in presets} >= {"toy", "uav-quick", "uav-paper", "quadruped-quick",
                                          "quadruped-hard", "quadruped-paper"}
    for p in presets:
        cfg = load_config(p)
        assert cfg.name == p.stem
        # every file a preset names is shipped with it
        for section, name in cfg.input_files():
            f = getattr(section, name)
            assert Path(f).is_file(), f"{p.name} names a missing file {f}"


def test_every_file_a_config_names_is_read_from_the_configs_folder(tmp_path: Path) -> None:
    """prior, es.init_mean, es.init_var and each baseline's weights: a relative path is the
    config's neighbour, an absolute one stays; numbers and absent files are no files."""
    elsewhere = str((tmp_path / "abs.npy").resolve())
    data = _base() | {"prior": "p.safetensors", "es": {"init_mean": "m.npy", "init_var": 2.0},
                      "baselines": [{"name": "a", "weights": "w/a.npy"}, {"name": "b"},
                                    {"name": "c", "weights": elsewhere}]}
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "run.yaml").write_text(yaml.safe_dump(data))
    cfg = load_config(tmp_path / "cfg" / "run.yaml")
    here = (tmp_path / "cfg").resolve()
    assert [(type(s).__name__, n, getattr(s, n)) for s, n in cfg.input_files()] == [
        ("RunConfig", "prior", str(here / "p.safetensors")),
        ("ESConfig", "init_mean", str(here / "m.npy")),
        ("BaselineConfig", "weights", str(here / "w" / "a.npy")),
        ("BaselineConfig", "weights", elsewhere)]
    assert cfg.es.init_var == 2.0 and cfg.baselines[1].weights is None


# -- types: a boolean is not a number -----------------------------------------------------------
@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"policies": {"m": True}}, "policies.m"),
        ({"es": {"iterations": True}}, "es.iterations"),
        ({"es": {"lr_mu": True}}, "es.lr_mu"),
        ({"certificate": {"n": [True]}}, "certificate.n.0"),
        ({"certificate": {"delta": False}}, "certificate.delta"),
        ({"seeds": {"prior": [0, True]}}, "seeds.prior.1"),
        ({"executor": {"workers": True}}, "executor.workers"),
        ({"policies": {"m": "5"}}, "policies.m"),
        ({"policies": {"m": 5.5}}, "policies.m"),
    ],
)
def test_booleans_and_strings_are_not_numbers(patch: dict, fragment: str) -> None:
    with pytest.raises(PacplanError) as info:
        parse_config(_base() | patch, source="x.yaml")
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_m_true_in_a_yaml_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("name: t\nworld: {name: toy}\npolicies: {m: true}\n")
    with pytest.raises(PacplanError, match=r"policies\.m: .*integer.*got True"):
        load_config(path)


# -- YAML: duplicate keys, aliases, encodings -----------------------------------------------------
def test_duplicate_yaml_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: t\nworld: {name: toy}\npolicies:\n  m: 5\n  m: 7\n")
    with pytest.raises(PacplanError, match=r"dup\.yaml: duplicate key 'm'.* \(line 5, column 3\)"):
        load_config(path)


def test_duplicate_top_level_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text("name: t\nworld: {name: toy}\nname: u\n")
    with pytest.raises(PacplanError, match="duplicate key 'name'"):
        load_config(path)


def test_yaml_alias_bomb_is_refused_before_expansion(tmp_path: Path) -> None:
    lines = ["name: t", "world: {name: toy}", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    lines += ["baselines:", "  - name: b", "    world_options: {big: *a8}"]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(PacplanError, match=r"bomb\.yaml: .*anchors and aliases"):
        load_config(path)


def test_a_single_anchor_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "anchor.yaml"
    path.write_text("name: t\nworld: &w {name: toy}\n")
    with pytest.raises(PacplanError, match=r"anchors and aliases .* \(line 2"):
        load_config(path)


def test_non_utf8_config_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes("name: caf\u00e9\nworld: {name: toy}\n".encode("latin-1"))
    with pytest.raises(PacplanError, match=r"latin\.yaml: not UTF-8 text") as info:
        load_config(path)
    assert "\n" not in str(info.value)


def test_dumped_config_has_no_aliases_and_loads_back(tmp_path: Path) -> None:
    """Shared values in the options must not be written as YAML anchors (they are refused)."""
    shared = [1.0, 2.0, 3.0]
    world = {"name": "toy", "options": {"dim": 3, "target": shared}}
    baselines = [{"name": "b", "world_options": {"target": shared}}]
    cfg = parse_config(_base() | {"world": world, "baselines": baselines})
    dump_config(cfg, tmp_path / "c.yaml")
    assert "&" not in (tmp_path / "c.yaml").read_text()
    assert load_config(tmp_path / "c.yaml") == cfg


# -- names, seeds, baselines ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["../../x", "/tmp/x", "a/b", "a\\b", "..", ".hidden", "-x",
                                  "a..b", "", "x\n"])
def test_unsafe_run_names_are_refused(name: str) -> None:
    with pytest.raises(PacplanError, match=r"x\.yaml: invalid config: name: .*not a safe name"):
        parse_config(_base() | {"name": name}, source="x.yaml")


def test_safe_run_names_load() -> None:
    for name in ("toy", "uav-quick", "run_2.v1", "A1"):
        assert parse_config(_base() | {"name": name}).name == name


def test_run_name_cannot_escape_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture) -> None:
    """`pacplan run` without --out writes runs/<name>: a name with '..' is refused first."""
    import sys

    from pacplan.cli import main

    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    (work / "c.yaml").write_text("name: ../../escaped\nworld: {name: toy, options: {dim: 2}}\n")
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "argv", ["pacplan", "run", "c.yaml", "--quiet"])
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2 and "not a safe name" in capsys.readouterr().err
    assert not (tmp_path / "escaped").exists() and not (work / "runs").exists()


@pytest.mark.parametrize("role", ["prior", "cert", "test"])
def test_seeds_beyond_int64_are_refused(role: str) -> None:
    seeds = {"prior": [0, 10], "cert": [10, 20], "test": [20, 30]}
    seeds[role] = [10**19, 10**20]
    with pytest.raises(PacplanError) as info:
        parse_config(_base() | {"seeds": seeds}, source="x.yaml")
    msg = str(info.value)
    assert f"seeds.{role}" in msg and "largest seed 9223372036854775807" in msg
    assert "\n" not in msg


@pytest.mark.parametrize("field", [("es", "seed"), ("policies", "seed")])
def test_rng_seeds_beyond_int64_are_refused(field: tuple[str, str]) -> None:
    section, key = field
    with pytest.raises(PacplanError, match=f"{section}.{key}"):
        parse_config(_base() | {section: {key: 10**20}})


def test_cert_seed_range_up_to_int64_loads() -> None:
    top = 2**63 - 1
    cfg = parse_config(_base() | {"seeds": {"prior": [0, 10], "cert": [top - 10, top],
                                            "test": [20, 30]}})
    assert cfg.seeds.cert == (top - 10, top)


def test_duplicate_baseline_names_are_named() -> None:
    data = _base() | {"baselines": [{"name": "zeros"}, {"name": "b"}, {"name": "zeros"}]}
    with pytest.raises(PacplanError, match="baselines: duplicate baseline name 'zeros'"):
        parse_config(data, source="x.yaml")


def test_unsafe_baseline_name_is_refused() -> None:
    with pytest.raises(PacplanError, match=r"baselines\.0\.name: .*not a safe name"):
        parse_config(_base() | {"baselines": [{"name": ".."}]}, source="x.yaml")


# -- world options --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "fragments"),
    [
        ({"dim": "eight"}, ["world 'toy'", "option 'dim'", "'eight'"]),
        ({"dim": True}, ["world 'toy'", "option 'dim'"]),
        ({"dim": 8.5}, ["world 'toy'", "option 'dim'"]),
        ({"shift": "wide"}, ["world 'toy'", "option 'shift'"]),
        ({"target": ["a", "b"]}, ["world 'toy'", "option 'target'"]),
        ({"dimm": 8}, ["world 'toy'", "unknown option 'dimm'", "dim, target"]),
    ],
)
def test_bad_world_options_name_the_world_and_the_option(options: dict,
                                                         fragments: list[str]) -> None:
    from pacplan.worlds.base import make_world

    with pytest.raises(PacplanError) as info:
        make_world("toy", **options)
    msg = str(info.value)
    assert all(f in msg for f in fragments), msg
    assert "\n" not in msg


def test_toy_world_checks_its_own_option_types() -> None:
    """Built directly (not through make_world), the toy world still names a bad option."""
    from pacplan.worlds.toy import ToyWorld

    for kwargs, option in [({"dim": "eight"}, "dim"), ({"work": 1.5}, "work"),
                           ({"scale": "big"}, "scale"), ({"crash_on_seed": "3"}, "crash_on_seed"),
                           ({"shift": True}, "shift")]:
        with pytest.raises(PacplanError, match=f"toy world: option {option} "):
            ToyWorld(**kwargs)


def test_factory_value_errors_become_one_line() -> None:
    """A factory that parses its options itself (float('eight')) is a user error too."""
    with pytest.raises(PacplanError, match=r"world 'parsing': .*option 'width'.*'eight'"):
        _make_parsing_world(width="eight")


def _parsing_world(width="1.0"):  # unannotated: only the factory's own parsing checks it
    return float(width)


def _make_parsing_world(**options):
    from pacplan.worlds import base

    base._REGISTRY["parsing"] = base.WorldEntry(f"{__name__}:_parsing_world")
    try:
        return base.make_world("parsing", **options)
    finally:
        del base._REGISTRY["parsing"]


def test_shipped_presets_world_options_pass_the_type_checks() -> None:
    """Every preset's world options (and baseline overrides) match the factory's annotations."""
    from pacplan.worlds.base import check_world_options

    for p in (p.path for p in list_presets()):
        cfg = load_config(p)
        check_world_options(cfg.world.name, cfg.world.options)
        for base in cfg.baselines:
            check_world_options(cfg.world.name, cfg.world.options | base.world_options)
