"""Planner directories are self-contained trees of regular files, each listed once; `Planner.load`
checks what is cheap even when manifest.json was re-hashed; the runtime refuses bad
observations and calls with one PlannerError (issue 25, classes 1 and 3-5, and the runtime's
tracebacks)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from helpers import cli, swap_on_second_open
from pacplan.errors import PacplanError
from pacplan.export import export_planner, verify_planner
from pacplan.runtime import Planner, PlannerError
from pacplan.worlds.quadruped.export import quadruped_net_onnx
from pacplan.worlds.uav.export import uav_net_onnx

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
QUADRUPED_RUNS = (RESULTS / "quadruped",
                  ROOT / "benchmarks" / "data" / "quadruped-minitaur-v1" / "results" / "quadruped")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("planners")
    out = {"uav": export_planner(RESULTS / "uav", base / "uav")}
    run = next((r for r in QUADRUPED_RUNS if (r / "manifest.json").is_file()), None)
    if run is not None:  # the shipped quadruped run moves while its robot is being changed
        out["quadruped"] = export_planner(run, base / "quadruped")
    return out


@pytest.fixture
def planner(exported: dict[str, Path], tmp_path: Path) -> Path:
    return Path(shutil.copytree(exported["uav"], tmp_path / "planner"))


@pytest.fixture
def quad_planner(exported: dict[str, Path], tmp_path: Path) -> Path:
    if "quadruped" not in exported:
        pytest.skip("no shipped quadruped run to export")
    return Path(shutil.copytree(exported["quadruped"], tmp_path / "quad"))


def rehash(root: Path, files: list[str] | None = None) -> None:
    """The adversary: manifest.json lists every regular file (or `files`) at its sha256."""
    if files is None:
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*")
                       if p.is_file() and not p.is_symlink()
                       and p.relative_to(root).as_posix() != "manifest.json")
    manifest = {"format": "pacplan-planner-manifest/1",
                "files": {f: hashlib.sha256((root / f).read_bytes()).hexdigest()
                          for f in files}}
    (root / "manifest.json").write_text(json.dumps(manifest))


def edit_json(path: Path, edit: Callable[[dict], object]) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def refused_by_both(root: Path, *words: str) -> None:
    """`Planner.load` and `pacplan verify` both refuse, in one line holding every word."""
    with pytest.raises(PlannerError) as info:
        Planner.load(root)
    with pytest.raises(PacplanError) as info2:
        verify_planner(root)
    for message in (str(info.value), str(info2.value)):
        assert "\n" not in message
        for word in words:
            assert word in message, (word, message)


def test_known_net_hashes_are_the_exported_nets() -> None:
    from pacplan.export.fixed import fixed_parts
    from pacplan.runtime.spec import FIXED_SHA256, GAIT_MAP, NET_SHA256
    from pacplan.worlds.quadruped.gait import GaitParams

    assert hashlib.sha256(uav_net_onnx()).hexdigest() in NET_SHA256["uav"]
    assert hashlib.sha256(quadruped_net_onnx()).hexdigest() in NET_SHA256["quadruped"]
    for options in ({}, {"net_scale": 2.0}):
        rest = {k: v for k, v in fixed_parts("uav", options).items() if k != "net_scale"}
        text = json.dumps(rest, sort_keys=True, separators=(",", ":")).encode()
        assert hashlib.sha256(text).hexdigest() in FIXED_SHA256["uav"]
    # the runtime's gait map (which export writes) is the world's own map
    (a_scale, a_shift), (w_scale, w_shift) = GAIT_MAP["amplitude"], GAIT_MAP["omega"]
    for eta in ((0.0, 0.0, 0.0, 0.0), (0.3, 0.7, 0.5, 0.1), (1.0, 1.0, 1.0, 1.0)):
        gait = GaitParams.from_policy_output(np.array(eta))
        assert (gait.a1, gait.a2, gait.omega) == (a_scale * eta[0] + a_shift,
                                                  a_scale * eta[1] + a_shift,
                                                  w_scale * eta[2] + w_shift)


# ------------------------------------------------------------- class 3: the tree itself
def test_a_symlinked_file_outside_is_refused(planner: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.safetensors"
    shutil.move(planner / "weights.safetensors", outside)
    (planner / "weights.safetensors").symlink_to(outside)
    rehash(planner, [f for f in json.loads((planner / "manifest.json").read_text())["files"]])
    refused_by_both(planner, "weights.safetensors", "symbolic link")


def test_a_symlinked_folder_outside_is_refused(planner: Path, tmp_path: Path) -> None:
    shutil.move(planner / "run", tmp_path / "evidence")
    (planner / "run").symlink_to(tmp_path / "evidence")
    rehash(planner, json.loads((planner / "manifest.json").read_text())["files"])
    refused_by_both(planner, "symbolic link")


@pytest.mark.parametrize("kind", ["fifo", "loop", "dangling"])
def test_unlisted_special_entries_are_refused(planner: Path, kind: str) -> None:
    entry = planner / "run" / "extra"
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "loop":
        entry.symlink_to(entry)
    else:
        entry.symlink_to(planner / "nowhere")
    refused_by_both(planner, "extra")


def test_an_unlisted_regular_file_is_refused_by_load_too(planner: Path) -> None:
    (planner / "notes.txt").write_text("hello")
    refused_by_both(planner, "notes.txt", "not listed")


def test_a_listed_fifo_never_hangs(planner: Path) -> None:
    (planner / "weights.safetensors").unlink()
    os.mkfifo(planner / "weights.safetensors")
    refused_by_both(planner, "weights.safetensors")


def test_a_manifest_listing_a_file_twice_is_refused(planner: Path) -> None:
    text = (planner / "manifest.json").read_text()
    files = json.loads(text)["files"]
    twice = '"net.onnx": "' + "0" * 64 + '", '
    (planner / "manifest.json").write_text(json.dumps({"format": "pacplan-planner-manifest/1",
                                                       "files": files}).replace(
        '"files": {', '"files": {' + twice))
    refused_by_both(planner, "manifest.json", "twice")


@pytest.mark.parametrize("spelling", ["./net.onnx", "run/../net.onnx", "net.onnx/", "/net.onnx"])
def test_a_manifest_entry_in_another_spelling_is_refused(planner: Path, spelling: str) -> None:
    edit_json(planner / "manifest.json",
              lambda m: m["files"].__setitem__(spelling, m["files"]["net.onnx"]))
    refused_by_both(planner, "manifest.json", "not a file inside")


def _safetensors_header(path: Path) -> tuple[dict, bytes]:
    data = path.read_bytes()
    (size,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8 : 8 + size]), data[8 + size :]


def _write_safetensors(path: Path, header: dict, body: bytes) -> None:
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + body)


@pytest.mark.parametrize("shape", [[50, 2, 1, 4, 5], [50, -2, 1, 4, 4], [50, 2.0, 1, 4, 4],
                                   [50, 32], "50x32", [50, True, 1, 4, 4]])
def test_a_safetensors_header_with_an_invalid_shape_is_refused(planner: Path, shape) -> None:
    header, body = _safetensors_header(planner / "weights.safetensors")
    header["conv1.weight"]["shape"] = shape
    _write_safetensors(planner / "weights.safetensors", header, body)
    rehash(planner)
    refused_by_both(planner, "weights.safetensors")


def test_overlapping_safetensors_offsets_are_refused(planner: Path) -> None:
    header, body = _safetensors_header(planner / "weights.safetensors")
    start = header["conv1.weight"]["data_offsets"][0]
    header["conv1.bias"]["data_offsets"] = [start, start + 400]
    _write_safetensors(planner / "weights.safetensors", header, body)
    rehash(planner)
    refused_by_both(planner, "weights.safetensors")


# ------------------------------------------------ class 4: load checks what is cheap
def _spec(planner: Path, edit: Callable[[dict], object]) -> None:
    edit_json(planner / "planner.json", edit)
    rehash(planner)


def _k(planner: Path) -> int:
    return len(json.loads((planner / "planner.json").read_text())["posterior"]["policy_index"])


def _set(path: str, value: Callable[[int], object]) -> Callable[[dict], object]:
    """Set planner.json's field at dotted `path` to value(k), k = the support's size."""
    def edit(spec: dict) -> None:
        *parents, last = path.split(".")
        node = spec
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        k = len(spec["posterior"]["policy_index"])
        node[int(last) if isinstance(node, list) else last] = value(k)
    return edit


UAV_EDITS = {
    "point-mass": (_set("posterior.probability", lambda k: [1.0] + [0.0] * (k - 1)),
                   "probability"),
    "negative": (_set("posterior.probability", lambda k: [0.1 + 1 / k] + [-0.1 / (k - 1)]
                      + [1 / k] * (k - 2)), "probability"),
    "too-few": (_set("posterior.probability", lambda k: [1 / (k - 1)] * (k - 1)),
                "probability"),
    "uniform": (_set("posterior.probability", lambda k: [1 / k] * k), "certificate's p"),
    "string": (_set("posterior.probability", lambda k: ["0.1"] * k), "probability"),
    "repeated-index": (_set("posterior.policy_index", lambda k: [0, 0, *range(2, k)]),
                       "policy_index"),
    "index-beyond": (_set("posterior.policy_index", lambda k: [*range(k - 1), 10**6]),
                     "certificate's p"),
    "far": (_set("fixed.far_m", lambda k: -20.0), "far_m"),
    "net-scale": (_set("fixed.net_scale", lambda k: "5"), "net_scale"),
    "cell-size": (_set("fixed.cell_size", lambda k: 0), "cell_size"),
    "duration": (_set("fixed.primitives.duration_s", lambda k: -1), "duration_s"),
    "offsets": (_set("fixed.primitives.offsets_m", lambda k: [[0.0, 0.0]] * 24), "offsets_m"),
    "paths": (_set("fixed.primitives.check_displacements_m.0", lambda k: []),
              "check_displacements_m"),
    "image-size": (_set("fixed.image_size", lambda k: 49), "image_size"),
    "path-point": (_set("fixed.primitives.check_displacements_m.3.0.0", lambda k: 0.25),
                   "fixed"),
    "scale": (_set("fixed.net_scale", lambda k: 50.0), "net_scale"),
    "camera": (_set("fixed.camera.pitch_down_deg", lambda k: 0.0), "fixed"),
    "certified-cost": (_set("certified_cost", lambda k: 0.01), "certified_cost"),
    "dtype": (_set("net.dtype", lambda k: "float64"), "net.dtype"),
    "world-list": (_set("world", lambda k: ["uav"]), "world.name"),
    "world-name": (_set("world.name", lambda k: "quadruped"), "planner.json"),
    "no-posterior": (lambda s: s.pop("posterior"), "posterior"),
    "net-is-another-file": (_set("net.onnx", lambda k: "run/config.yaml"), "network"),
}


@pytest.mark.parametrize("case", sorted(UAV_EDITS))
def test_load_refuses_a_rehashed_unsafe_planner_json(planner: Path, case: str) -> None:
    edit, words = UAV_EDITS[case]
    _spec(planner, edit)
    with pytest.raises(PlannerError) as info:
        Planner.load(planner)
    assert words in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(PacplanError):
        verify_planner(planner)


@pytest.mark.parametrize("path, value, words", [
    ("fixed.n_proprio", 21, "n_proprio"),
    ("fixed.gait_map.amplitude", [0.8, 0.5], "amplitude"),
    ("fixed.gait_map.omega", [1e308, 20.0], "omega"),
    ("fixed.primitive_s", -0.5, "primitive_s"),
])
def test_load_refuses_unsafe_quadruped_fixed_parts(quad_planner: Path, path: str,
                                                   value: object, words: str) -> None:
    _spec(quad_planner, _set(path, lambda k: value))
    with pytest.raises(PlannerError, match=words):
        Planner.load(quad_planner)


def test_load_refuses_another_valid_onnx_net(planner: Path) -> None:
    (planner / "net.onnx").write_bytes(quadruped_net_onnx())
    rehash(planner)
    refused_by_both(planner, "net.onnx")


@pytest.mark.parametrize("value", [np.nan, np.inf, 1e-3])
def test_load_refuses_changed_weights(planner: Path, value: float) -> None:
    header, body = _safetensors_header(planner / "weights.safetensors")
    a, b = header["fc2.bias"]["data_offsets"]
    arr = np.frombuffer(body[a:b], "<f4").copy()
    arr[0] = value if not np.isfinite(value) or value != 1e-3 else arr[0] + value
    _write_safetensors(planner / "weights.safetensors", header,
                       body[:a] + arr.tobytes() + body[b:])
    rehash(planner)
    refused_by_both(planner, "weights.safetensors", "fc2.bias")


def test_out_of_range_filter_cells_are_refused_at_load(exported: dict[str, Path],
                                                       tmp_path: Path) -> None:
    uav = Path(shutil.copytree(exported["uav"], tmp_path / "uav"))
    _spec(uav, lambda s: s["fixed"]["filter_cells"].__setitem__(0, [48, 48]))
    with pytest.raises(PlannerError, match="filter_cells"):
        Planner.load(uav)
    _spec(uav, lambda s: s["fixed"]["filter_cells"].__setitem__(0, [0, 0]))
    _spec(uav, lambda s: s["fixed"].__setitem__("tie_break_order", [*range(24), 0]))
    with pytest.raises(PlannerError, match="tie_break_order"):
        Planner.load(uav)


# --------------------------------------------------------------- class 1: read once
def test_load_never_uses_a_file_swapped_after_the_hash_check(
        planner: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """planner.json swapped for a re-probabilised one between the hash pass and its use."""
    forged = json.loads((planner / "planner.json").read_text())
    k = len(forged["posterior"]["probability"])
    forged["posterior"]["probability"] = [1.0] + [0.0] * (k - 1)
    forged_bytes = json.dumps(forged).encode()
    swap_on_second_open(monkeypatch, planner / "planner.json", forged_bytes)
    with pytest.raises(PlannerError, match="changed"):
        Planner.load(planner)


# ------------------------------------------------ class 5 and the runtime's calls
@pytest.fixture(scope="module")
def quad(exported: dict[str, Path]) -> Planner:
    if "quadruped" not in exported:
        pytest.skip("no shipped quadruped run to export")
    p = Planner.load(exported["quadruped"])
    p.start_episode(np.random.default_rng(0))
    return p


def _obs(depth: object = None, proprio: object = None) -> dict[str, object]:
    return {"depth": np.full((50, 50), 5.0) if depth is None else depth,
            "proprio": np.zeros(22) if proprio is None else proprio}


@pytest.mark.parametrize("obs, words", [
    (_obs(depth=np.full((50, 50), 1e39)), "depth"),
    (_obs(proprio=np.full(22, -1e300)), "proprio"),
    (_obs(depth=np.full((50, 50), -1.0)), "negative"),
    ({"foo": 1}, "dict"),
    ({"depth": np.zeros((50, 50))}, "dict"),
    (np.zeros((50, 50)), "dict"),
    (_obs(depth=[[1.0, 2.0], [3.0]]), "depth"),
    (_obs(depth=np.full((50, 50), "5")), "depth"),
], ids=["depth-beyond-f32", "proprio-beyond-f32", "negative-depth", "foo", "no-proprio",
        "array", "ragged", "strings"])
def test_quadruped_observations_are_refused(quad: Planner, obs: object, words: str) -> None:
    with pytest.raises(PlannerError, match=words):
        quad.act(obs)


def test_uav_observations_are_refused(exported: dict[str, Path]) -> None:
    p = Planner.load(exported["uav"])
    p.start_episode(np.random.default_rng(0))
    with pytest.raises(PlannerError, match="float32's range"):
        p.act(np.full((50, 50), 1e39))
    with pytest.raises(PlannerError, match="negative"):
        p.act(np.full((50, 50), -0.5, np.float32))
    assert p.act(np.full((50, 50), 5.0)).primitive in range(25)


@pytest.mark.parametrize("rng", [42, "seed", np.random.RandomState(0), None])
def test_start_episode_needs_a_generator(exported: dict[str, Path], rng: object) -> None:
    p = Planner.load(exported["uav"])
    p.start_episode(np.random.default_rng(0))
    with pytest.raises(PlannerError, match="Generator"):
        p.start_episode(rng)  # type: ignore[arg-type]
    assert p.policy is not None  # the open episode is untouched


@pytest.mark.parametrize("threads", [0, -1, "2", 2.5, True])
def test_load_threads_must_be_a_positive_integer(exported: dict[str, Path],
                                                 threads: object) -> None:
    with pytest.raises(PlannerError, match="threads"):
        Planner.load(exported["uav"], threads=threads)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["[]", "[" * 100_000 + "]" * 100_000, '{"a": NaN}', "\xff"])
def test_unreadable_planner_json_is_one_line(planner: Path, text: str, capsys) -> None:
    (planner / "planner.json").write_bytes(text.encode("utf-8", "surrogateescape")
                                           if text != "\xff" else b"\xff")
    rehash(planner)
    with pytest.raises(PlannerError) as info:
        Planner.load(planner)
    assert "planner.json" in str(info.value) and "\n" not in str(info.value)
    code, _, err = cli(["verify", str(planner)], capsys)
    assert code == 2 and "planner.json" in err and "Traceback" not in err


def test_a_planner_path_that_is_a_symlink_loop_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    with pytest.raises(PlannerError, match="loop"):
        Planner.load(tmp_path / "loop")
    code, _, err = cli(["verify", str(tmp_path / "loop")], capsys)
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_is_one_line(planner: Path) -> None:
    (planner / "weights.safetensors").chmod(0)
    with pytest.raises(PlannerError, match=r"weights\.safetensors"):
        Planner.load(planner)


def test_the_run_manifest_holds_only_the_shipped_evidence(planner: Path) -> None:
    entries = json.loads((planner / "run" / "manifest.json").read_text())
    assert set(entries) == {"costs/cert.npy", "costs/test.npy", "policies.npy",
                            "prior.safetensors"}
    entries["costs/baseline-x.npy"] = entries["costs/test.npy"]  # vouches for nothing shipped
    (planner / "run" / "manifest.json").write_text(json.dumps(entries))
    rehash(planner)
    with pytest.raises(PacplanError, match="not shipped"):
        verify_planner(planner)


@pytest.mark.parametrize("path", [None, 123, b"/tmp", "", "/etc/passwd", "/nonexistent"])
def test_load_of_something_that_is_not_a_planner_is_one_line(path: object) -> None:
    with pytest.raises(PlannerError) as info:
        Planner.load(path)  # type: ignore[arg-type]
    assert "\n" not in str(info.value)
