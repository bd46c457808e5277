"""Property: any edit of a certificate that changes a checked meaning makes `pacplan verify`
exit 2 with one line of stderr; an edit that changes nothing still passes.

Mutations: any field (top level, inside a matrix reference, one entry of p or test_ci, or a
whole container) replaced by any JSON type, a non-finite number, a loosened or tightened
number, a deleted field or an extra one. Two writers: a careless one who leaves the content
hash alone (every change must fail), and an adversary who recomputes it (every change to a
recomputed field must still fail; created, pacplan_version and an empty provenance are only
held by the hash, see docs/verify.md).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pacplan.choices import BOUND_CHOICES
from verify_helpers import read, run_cli, small_certificate, write

Path_ = tuple[Any, ...]
HASH_ONLY = {"created", "pacplan_version", "provenance", "content_sha256"}
PLAUSIBLE = [*BOUND_CHOICES, "gibbs", "rep:clarabel", "rep:mosek", "rep", "inf", "-inf", "nan",
             "0.5", "200", "", "cert.npy", "test.npy", "[/x]", "0" * 64]


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("property")
    path = small_certificate(folder)
    return folder, read(path)


def _paths(obj: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every field and every container in the certificate, as key/index paths."""
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for key, value in obj.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            out += _paths(value, (*prefix, i))
    return out


def _get(obj: Any, path: Path_) -> Any:
    for key in path:
        obj = obj[key]
    return obj


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON meaning: same types (bool ≠ number, int ≠ float) and equal values."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return False
    return a == b


def _within_tolerance(old: Any, new: Any) -> bool:
    """A number moved by less than verify's tolerances could pass a re-hashed edit."""
    numbers = (int, float)
    if isinstance(old, bool) or isinstance(new, bool):
        return False
    if not (isinstance(old, numbers) and isinstance(new, numbers)):
        return False
    if not (math.isfinite(old) and math.isfinite(new)):
        return False
    if isinstance(old, int) and not isinstance(new, int):
        return False  # an integer field given a float is a type error
    return abs(new - old) <= 1e-6 * max(1.0, abs(old))


JSON_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.sampled_from(PLAUSIBLE), st.lists(st.floats(0, 1), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(0, 3), max_size=2),
)
NON_FINITE = st.sampled_from([math.inf, -math.inf, math.nan])
STEPS = st.sampled_from([-1.0, -0.5, -0.1, -1e-2, -1e-3, 1e-3, 1e-2, 0.1, 0.5, 1.0])


def _new_value(draw: st.DrawFn, kind: str, old: Any) -> Any:
    numeric = isinstance(old, (int, float)) and not isinstance(old, bool)
    if kind == "non_finite":
        return draw(NON_FINITE)
    if kind == "scale" and numeric:
        return old * (1.0 + draw(STEPS))
    if kind == "shift" and numeric:
        return old + draw(STEPS)
    if kind == "same":
        return json.loads(json.dumps(old))
    return draw(JSON_VALUES)


@st.composite
def mutations(draw: st.DrawFn, data: dict[str, Any]) -> tuple[str, dict[str, Any], Path_, Any]:
    """(description, mutated certificate, path, new value or a marker for delete/extra)."""
    mutated = json.loads(json.dumps(data))
    path = draw(st.sampled_from(_paths(data)))
    parent, key = _get(mutated, path[:-1]), path[-1]
    kind = draw(st.sampled_from(["replace", "non_finite", "scale", "shift", "delete", "extra",
                                 "same"]))
    if kind == "delete":
        del parent[key]
        return f"delete {path}", mutated, path, "<deleted>"
    if kind == "extra":
        target = parent if isinstance(parent, dict) else mutated
        target["extra_field"] = draw(JSON_VALUES)
        return f"extra field beside {path}", mutated, path, "<extra>"
    parent[key] = _new_value(draw, kind, parent[key])
    return f"{kind} {path} = {parent[key]!r}", mutated, path, parent[key]


def _changed(data: dict[str, Any], mutated: dict[str, Any]) -> bool:
    return not _same(data, mutated)


def _must_fail_rehashed(data: dict[str, Any], path: Path_, new: Any) -> bool | None:
    """True/False where a re-hashed edit must fail/pass; None where either is allowed."""
    if path[0] in HASH_ONLY:
        return None
    if new in ("<deleted>", "<extra>"):
        return True
    old = _get(data, path)
    if _same(old, new):
        return False
    if _within_tolerance(old, new):
        return None
    if path == ("bound",) and new in ("best", "klinv"):
        return None  # the same objective: kl-inverse is always the smallest bound
    return True


@settings(max_examples=200, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data(), st.booleans())
def test_every_meaningful_mutation_fails_in_one_line(original, data, rehash):
    folder, certificate = original
    what, mutated, path, new = data.draw(mutations(certificate))
    target = write(folder / "mutated.json", mutated, rehash=rehash)
    code, out, err = run_cli("verify", str(target))
    lines = err.strip().splitlines()
    if code != 0:  # a failure is always one clean line
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error:"), (what, err)
        assert "Traceback" not in err
    else:
        assert "OK" in out and err == "", (what, err)
    expected = _changed(certificate, mutated) if not rehash else (
        _must_fail_rehashed(certificate, path, new))
    if expected is not None:
        assert (code == 2) == expected, (what, rehash, err or out)


def test_reserialising_changes_nothing(original):
    folder, certificate = original
    target = folder / "same.json"
    target.write_text(json.dumps(certificate, indent=1, sort_keys=True, ensure_ascii=True))
    code, _out, err = run_cli("verify", str(target))
    assert code == 0 and err == "", err
