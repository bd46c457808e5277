"""Property: random mutations of a valid planner directory, re-hashed into manifest.json or not.

- Not re-hashed: every change is refused by `pacplan verify` and by `Planner.load`.
- Re-hashed (the adversary): every change of meaning is refused by `verify`; `Planner.load`
  either refuses or loads a planner that flies exactly like the original (same support,
  probabilities and decisions), so no change that is unsafe to fly is accepted.

Mutations: a byte of any file set to another value; a file truncated, extended or deleted; a
field of planner.json (or of the run's config.yaml) replaced by another JSON value, deleted or
added; a manifest entry duplicated or respelled; an extra regular file, symlink or FIFO.
A byte change that leaves a JSON file's or a safetensors file's meaning unchanged (whitespace)
is skipped: nothing is there to refuse.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_planner_dir import rehash

from pacplan.config import load_config
from pacplan.errors import PacplanError
from pacplan.export import export_planner, verify_planner
from pacplan.runtime import Planner, PlannerError
from pacplan.runtime.bundle import parse_safetensors
from pacplan.runtime.planner import Episode

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

RESULTS = Path(__file__).resolve().parents[2] / "results"
VALUES = [None, True, False, 0, 1, -1, 0.5, 1e308, -1e-308, 2**63, "", "x", "0" * 64, [],
          [0], [1.0], {}, {"a": 1}]
OBS = [np.full((50, 50), 20.0, np.float32), np.linspace(0.5, 20.0, 2500).reshape(50, 50),
       np.random.default_rng(0).uniform(0.1, 20.0, (50, 50)).astype(np.float32)]


@pytest.fixture(scope="module")
def original(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_planner(RESULTS / "uav", tmp_path_factory.mktemp("prop") / "planner")


def _behaviour(planner: Planner) -> list[Any]:
    out: list[Any] = [planner.policy_index.tolist(), planner.probability.tolist()]
    for slot in range(len(planner.policy_index)):
        episode = Episode(planner, slot)  # each policy of the support, as a draw would pick it
        for obs in OBS:
            d = episode.act(obs)
            out += [d.primitive, d.offset_m, d.duration_s, d.trajectory_m.tolist(),
                    d.times_s.tolist(), d.scores.tolist()]
    return out


@pytest.fixture(scope="module")
def flies(original: Path) -> list[Any]:
    return _behaviour(Planner.load(original))


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:8]):
            out += _paths(v, (*prefix, i))
    return out


def _checked_config(root: Path) -> Any:
    """The parts of config.yaml a certificate rests on (None: it does not load). The rest
    (es, executor, report, name) describes how prior.safetensors was made, whose sha256 is
    checked, so a change there is not a change of meaning (docs/verify.md)."""
    try:
        cfg = load_config(root / "run" / "config.yaml")
    except PacplanError:
        return None
    # seeds.prior too where ES trained the prior; this planner's prior came from a file that
    # records its own seeds, which the certificate states and the run's manifest.json vouches for
    return (cfg.world.model_dump(), cfg.seeds.cert, cfg.seeds.test, cfg.policies.m,
            cfg.policies.seed, cfg.certificate.delta)


def _meaning(name: str, data: bytes) -> Any:
    """What a file says, where bytes can change without changing it; else the bytes."""
    try:
        if name.endswith(".json"):
            return json.loads(data)
        if name.endswith(".yaml"):
            return yaml.safe_load(data)
        if name.endswith(".safetensors") and name == "weights.safetensors":
            return {k: (v.dtype.str, v.shape, v.tobytes())
                    for k, v in parse_safetensors(data, name).items()}
    except Exception:  # unreadable: a change of meaning
        return ("unreadable", data)
    return data


def _mutate(root: Path, data: st.DataObject) -> str:
    """Apply one random mutation; returns its description."""
    files = sorted(json.loads((root / "manifest.json").read_text())["files"])
    kind = data.draw(st.sampled_from(["byte", "truncate", "extend", "delete", "field",
                                      "config", "manifest", "extra"]))
    if kind in ("byte", "truncate", "extend", "delete"):
        name = data.draw(st.sampled_from([*files, "manifest.json"]))
        path = root / name
        before = path.read_bytes()
        if kind == "byte":
            i = data.draw(st.integers(0, len(before) - 1))
            value = data.draw(st.integers(0, 255).filter(lambda b: b != before[i]))
            after = before[:i] + bytes([value]) + before[i + 1 :]
            assume(_meaning(name, after) != _meaning(name, before))
            path.write_bytes(after)
        elif kind == "truncate":
            path.write_bytes(before[: data.draw(st.integers(0, len(before) - 1))])
        elif kind == "extend":
            path.write_bytes(before + data.draw(st.binary(min_size=1, max_size=8)))
        else:
            path.unlink()
        return f"{kind} {name}"
    if kind in ("field", "config"):
        name = "planner.json" if kind == "field" else "run/config.yaml"
        text = (root / name).read_text()
        doc = json.loads(text) if kind == "field" else yaml.safe_load(text)
        path = data.draw(st.sampled_from(_paths(doc)))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        how = data.draw(st.sampled_from(["replace", "delete", "add"]))
        if how == "replace":
            value = data.draw(st.sampled_from(VALUES))
            assume(json.dumps(value) != json.dumps(parent[path[-1]]))
            parent[path[-1]] = value
        elif how == "delete":
            del parent[path[-1]]
        else:
            assume(isinstance(parent, dict))
            parent["extra_field"] = 1
        if kind == "field" and path == ("exported_by",) and how == "replace":
            assume(not isinstance(parent["exported_by"], str))  # a version string: free text
        (root / name).write_text(json.dumps(doc) if kind == "field" else yaml.safe_dump(doc))
        return f"{kind} {how} {path} in {name}"
    if kind == "manifest":
        manifest = json.loads((root / "manifest.json").read_text())
        name = data.draw(st.sampled_from(files))
        spelling = data.draw(st.sampled_from([f"./{name}", f"{name}/", f"run/../{name}",
                                              f"/{name}", "twice"]))
        if spelling == "twice":
            text = json.dumps(manifest).replace('"files": {', '"files": {"' + name + '": "'
                                                + "0" * 64 + '", ')
        else:
            manifest["files"][spelling] = manifest["files"][name]
            text = json.dumps(manifest)
        (root / "manifest.json").write_text(text)
        return f"manifest {spelling} {name}"
    what = data.draw(st.sampled_from(["file", "symlink-out", "symlink-in", "fifo", "loop"]))
    folder = root / data.draw(st.sampled_from(["", "run", "run/costs"]))
    entry = folder / "extra.bin"
    if what == "file":
        entry.write_bytes(b"x")
    elif what == "symlink-out":
        entry.symlink_to("/etc/hostname")
    elif what == "symlink-in":
        entry.symlink_to(root / "net.onnx")
    elif what == "fifo":
        os.mkfifo(entry)
    else:
        entry.symlink_to(entry)
    return f"extra {what} in {folder.name or '.'}"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(data=st.data(), rehashed=st.booleans())
def test_mutated_planners(original: Path, flies: list[Any], tmp_path_factory, data,
                          rehashed: bool) -> None:  # type: ignore[no-untyped-def]
    root = Path(shutil.copytree(original, tmp_path_factory.mktemp("m") / "planner",
                                symlinks=True))
    what = _mutate(root, data)
    if rehashed and not what.startswith("manifest") and "manifest.json" not in what.split():
        rehash(root)  # every regular file, an extra one included
    descriptive = rehashed and "run/config.yaml" in what and \
        _checked_config(root) == _checked_config(original)
    try:
        verify_planner(root)
        assert descriptive, f"verify accepted: {what}"
    except PacplanError as exc:
        assert "\n" not in str(exc), what
    try:
        planner = Planner.load(root)
    except PlannerError as exc:
        assert "\n" not in str(exc), what
        return
    assert rehashed, f"load accepted an un-rehashed change: {what}"
    assert _behaviour(planner) == flies, f"load accepted a planner that flies otherwise: {what}"
