"""CITATION.cff is Citation File Format 1.2.0 with what GitHub's "Cite this repository" needs,
cites the paper pacplan implements, and agrees with the package (version, license, repository).
Validated once against the CFF 1.2.0 JSON schema with `cffconvert --validate`."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import pacplan

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[1]
PAPER = "Probably Approximately Correct Vision-Based Planning using Motion Primitives"
REFERENCE_TYPES = {"conference-paper", "article", "software", "generic"}  # those used here


def _cff() -> dict[str, Any]:
    data = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def _check_authors(authors: Any) -> None:
    assert isinstance(authors, list) and authors
    for person in authors:
        # a person has family-names (given-names optional), an entity has a name
        assert isinstance(person.get("family-names") or person.get("name"), str), person


def _check_reference(ref: dict[str, Any]) -> None:
    assert ref["type"] in REFERENCE_TYPES and ref["title"] == PAPER
    _check_authors(ref["authors"])
    names = [(a["given-names"], a["family-names"]) for a in ref["authors"]]
    assert names == [("Sushant", "Veer"), ("Anirudha", "Majumdar")]
    assert ref["volume"] == 155 and ref["publisher"]["name"] == "PMLR"
    assert "CoRL 2020" in ref["conference"]["name"]
    assert isinstance(ref["year"], int) and ref["start"] < ref["end"]


def test_the_required_keys_of_cff_1_2_0() -> None:
    data = _cff()
    assert data["cff-version"] == "1.2.0"
    assert isinstance(data["message"], str) and data["message"].strip()
    assert isinstance(data["title"], str) and "pacplan" in data["title"]
    _check_authors(data["authors"])


def test_it_cites_the_paper() -> None:
    data = _cff()
    _check_reference(data["preferred-citation"])
    (reference,) = data["references"]
    _check_reference(reference)


def test_it_agrees_with_the_package() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    data = _cff()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert data["version"] == pacplan.__version__  # a release bumps both
    assert data["license"] == project["license"]
    assert data["repository-code"] == project["urls"]["Repository"]
    if "date-released" in data:  # YAML reads an unquoted ISO date as a date
        assert isinstance(data["date-released"], datetime.date)
