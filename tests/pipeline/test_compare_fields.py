"""`compare` leaves out only the fields the contract names (docs/reproducibility.md): an ES log
line's `seconds`, a certificate's `created` and `content_sha256`. The same names anywhere else
(a certificate's provenance, a config section, a deeper level) are data and are compared; they
used to be skipped at any depth."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from helpers import SMALL_TOY_RUN
from pacplan.config import parse_config
from pacplan.io.yamlio import read_yaml, yaml_text
from pacplan.pipeline.compare import Agreement, Difference, compare_runs, value_difference
from pacplan.pipeline.pipeline import run


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fields") / "run"
    run(parse_config(json.loads(json.dumps(SMALL_TOY_RUN))), out, progress=False)
    return out


@pytest.fixture
def twin(toy: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(toy, tmp_path / "twin"))


def _edit(path: Path, change: object) -> None:
    data = json.loads(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(json.dumps(data))


def _differs(toy: Path, twin: Path) -> Difference:
    result = compare_runs(toy, twin)
    assert isinstance(result, Difference), "the edit was not seen"
    return result


def test_the_documented_wall_clock_fields_are_skipped(toy: Path, twin: Path) -> None:
    _edit(twin / "certificates/N30.json",
          lambda c: c.update(created="2031-01-01T00:00:00Z", content_sha256="0" * 64))
    lines = (twin / "metrics.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["seconds"] = first["seconds"] + 100.0
    (twin / "metrics.jsonl").write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    assert isinstance(compare_runs(toy, twin), Agreement)


def test_a_seconds_or_created_inside_a_certificate_is_compared(toy: Path, twin: Path) -> None:
    cert = twin / "certificates/N30.json"
    _edit(cert, lambda c: c["provenance"].update(seconds=1.0))
    result = _differs(toy, twin)
    assert result.artifact == "certificates/N30.json"
    assert result.detail == "field provenance.seconds is in one run only"
    shutil.copyfile(toy / "certificates/N30.json", cert)
    _edit(cert, lambda c: c.update(seconds=2.0))  # `seconds` is no certificate's wall clock
    assert _differs(toy, twin).detail == "field seconds is in one run only"


def test_a_created_in_an_es_line_and_a_seconds_in_the_config_are_compared(
        toy: Path, twin: Path, tmp_path: Path) -> None:
    lines = (twin / "metrics.jsonl").read_text().splitlines()
    (twin / "metrics.jsonl").write_text(
        "\n".join([json.dumps({**json.loads(lines[0]), "created": "now"}), *lines[1:]]) + "\n")
    result = _differs(toy, twin)
    assert (result.artifact, result.detail) == ("metrics.jsonl",
                                                "line 1: field created is in one run only")
    shutil.copyfile(toy / "metrics.jsonl", twin / "metrics.jsonl")
    other = Path(shutil.copytree(toy, tmp_path / "other"))
    for config, seconds in ((other, 5), (twin, 6)):  # the same key in both, other values
        data = read_yaml(config / "config.yaml")
        data["world"]["options"]["seconds"] = seconds
        (config / "config.yaml").write_text(yaml_text(data))
    result = _differs(other, twin)
    assert (result.artifact, result.detail) == ("config.yaml",
                                                "field world.options.seconds: 5 vs 6")


def test_value_difference_skips_only_top_level_names() -> None:
    assert value_difference({"created": 1, "p": [0.5]}, {"created": 2, "p": [0.5]}) is None
    assert value_difference({"a": {"created": 1}}, {"a": {"created": 2}}) == (
        "field a.created: 1 vs 2")
    assert value_difference([{"seconds": 1}], [{"seconds": 2}]) == "field [0].seconds: 1 vs 2"
    assert value_difference({"seconds": 1}, {"seconds": 2}, uncompared=frozenset({"seconds"})
                            ) is None
