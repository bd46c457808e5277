"""One overwrite rule for every command that writes (issue 36): an output that is an input, or
that is or lies inside a planner or run directory, is refused in one line before anything is
read or written (`pacplan.io.outputs.refuse_overwriting`). `monitor --plot` is tested in
test_monitor.py; here the rule itself and every other command that writes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import yaml

from helpers import SMALL_TOY_RUN, cli
from pacplan.errors import PacplanError
from pacplan.io.outputs import folder_kind, refuse_overwriting

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

ROOT = Path(__file__).resolve().parents[2]


def _tree(folder: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def planner_dir(tmp_path: Path) -> Path:
    """The two files that make a folder a planner directory (pacplan export writes more)."""
    folder = tmp_path / "planner"
    folder.mkdir()
    (folder / "planner.json").write_text('{"format": "pacplan-planner/1"}\n')
    (folder / "manifest.json").write_text('{"format": "pacplan-planner-manifest/1"}\n')
    return folder


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory as `pacplan run` leaves it after its first finished step."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "config.yaml").write_text(yaml.safe_dump(SMALL_TOY_RUN))
    (folder / "manifest.json").write_text("{}\n")
    return folder


def test_what_counts_as_a_planner_or_run_directory(tmp_path: Path, planner_dir: Path,
                                                   run_dir: Path) -> None:
    assert folder_kind(planner_dir) == "planner directory"
    assert folder_kind(run_dir) == "run directory"
    started = tmp_path / "started"  # a run still training its prior: no manifest yet
    started.mkdir()
    (started / "config.yaml").write_text("name: x\n")
    (started / "run.lock").write_text("")
    assert folder_kind(started) == "run directory"
    copied = tmp_path / "copied"  # a prior in training committed as a stage: no lock, no manifest
    copied.mkdir()
    (copied / "config.yaml").write_text("name: x\n")
    (copied / "es_state.json").write_text("{}")
    assert folder_kind(copied) == "run directory"
    refuse_overwriting(copied, "--out", resumes=True)  # resumed, not refused as foreign
    for files in (["manifest.json"], ["config.yaml"], ["planner.json"]):  # a web app's, …
        other = tmp_path / "-".join(files)
        other.mkdir()
        for name in files:
            (other / name).write_text("{}")
        assert folder_kind(other) is None
        refuse_overwriting(other / "plot.png", "--out")
    assert folder_kind(tmp_path / "nothing") is None
    assert folder_kind(ROOT / "results" / "uav") == "run directory"


@pytest.mark.parametrize("where", ["planner", "run", "deep-in-run", "through-a-symlink"])
def test_a_file_inside_a_planner_or_run_directory_is_refused(planner_dir: Path, run_dir: Path,
                                                             tmp_path: Path, where: str) -> None:
    out = {"planner": planner_dir / "plot.png", "run": run_dir / "certificate.json",
           "deep-in-run": run_dir / "new" / "folders" / "x.json"}.get(where)
    if where == "through-a-symlink":
        os.symlink(planner_dir, tmp_path / "link")
        out = tmp_path / "link" / "plot.png"
    with pytest.raises(PacplanError) as info:
        refuse_overwriting(out, "--out", {"COSTS": tmp_path / "c.npy"})
    kind = "run" if "run" in where else "planner"
    assert f"--out {out} is inside the {kind} directory" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_run_may_resume_its_own_directory_but_nothing_else(planner_dir: Path, run_dir: Path
                                                             ) -> None:
    refuse_overwriting(run_dir, "--out", resumes=True)  # run / train-prior resume it
    with pytest.raises(PacplanError, match="is a run directory"):
        refuse_overwriting(run_dir, "--out")  # export, data --cache: never
    with pytest.raises(PacplanError, match="is a planner directory"):
        refuse_overwriting(planner_dir, "--out", resumes=True)
    nested = run_dir / "runs" / "other"
    nested.mkdir(parents=True)
    (nested / "config.yaml").write_text("name: x\n")
    (nested / "run.lock").write_text("")
    with pytest.raises(PacplanError, match=f"is inside the run directory {run_dir}"):
        refuse_overwriting(nested, "--out", resumes=True)


@pytest.mark.parametrize("inside", ["run", "planner"])
def test_certify_matrix_out_inside_a_run_or_planner_directory(
        planner_dir: Path, run_dir: Path, tmp_path: Path, inside: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    np.save(tmp_path / "cert.npy", np.random.default_rng(0).random((40, 4)))
    folder = run_dir if inside == "run" else planner_dir
    before = _tree(folder)
    out = folder / "certificates" / "N40.json"
    code, out_text, err = cli(["certify-matrix", str(tmp_path / "cert.npy"), "--out", str(out)],
                              capsys)
    assert code == 2 and f"inside the {inside} directory" in err and out_text == "", err
    assert len(err.strip().splitlines()) == 1
    assert _tree(folder) == before


def _fake_render(seed: int, out: str, theta_path: str | None,
                 world_options: dict | None = None) -> str:
    from pacplan.io.files import atomic_write_bytes

    atomic_write_bytes(out, b"\x89PNG fake")
    return out


def test_render_out_inside_a_planner_directory(planner_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from pacplan.worlds import base

    entry = base.WorldEntry("pacplan.worlds.toy:ToyWorld", renderer=f"{__name__}:_fake_render")
    monkeypatch.setitem(base._REGISTRY, "painted", entry)
    before = _tree(planner_dir)
    for out in (planner_dir / "planner.json", planner_dir / "render.png"):
        code, _, err = cli(["render", "painted", "--seed", "1", "--out", str(out)], capsys)
        assert code == 2 and "inside the planner directory" in err, err
    assert _tree(planner_dir) == before


def test_export_out_inside_a_run_directory(run_dir: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    before = _tree(run_dir)
    out = run_dir / "planner"
    code, _, err = cli(["export", str(ROOT / "results" / "uav"), "--out", str(out)], capsys)
    assert code == 2 and "inside the run directory" in err, err
    assert _tree(run_dir) == before and not out.exists()


@pytest.mark.parametrize("command", ["run", "train-prior"])
def test_run_and_train_prior_out_inside_another_run_or_a_planner(
        command: str, planner_dir: Path, run_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "toy.yaml"
    config.write_text(yaml.safe_dump(SMALL_TOY_RUN))
    before = _tree(tmp_path)
    for out, words in [(run_dir / "toy", "inside the run directory"),
                       (planner_dir, "is a planner directory"),
                       (planner_dir / "toy", "inside the planner directory")]:
        code, _, err = cli([command, str(config), "--out", str(out), "--quiet"], capsys)
        assert code == 2 and words in err, err
        assert len(err.strip().splitlines()) == 1
    assert _tree(tmp_path) == before
    # a run directory itself is resumed, not refused (train-prior trains its prior there)
    code, _, err = cli([command, str(config), "--out", str(run_dir), "--quiet"], capsys)
    assert "directory" not in err and code == 0, err


def test_data_cache_inside_a_run_directory(run_dir: Path, capsys: pytest.CaptureFixture[str]
                                           ) -> None:
    before = _tree(run_dir)
    for cache in (run_dir, run_dir / "paper"):
        code, _, err = cli(["data", "paper", "--cache", str(cache), "--url",
                            "file:///nonexistent/pacplan"], capsys)
        assert code == 2 and "--cache" in err and "run directory" in err, err
    assert _tree(run_dir) == before and not (run_dir / "paper").exists()


@pytest.mark.parametrize("target", ["fifo", "folder", ".", "", "/", "through-a-file"])
def test_a_file_output_must_name_a_file(tmp_path: Path, target: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """certify-matrix --out (render --out, monitor --plot alike) replaced a FIFO or device with
    its file (`--plot /dev/null` as root replaced the system's /dev/null), and `.`, `/` or an
    empty path were a ValueError traceback."""
    np.save(tmp_path / "cert.npy", np.random.default_rng(0).random((40, 4)))
    (tmp_path / "notes.txt").write_text("kept\n")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    out = {"fifo": str(tmp_path / "fifo"), "folder": str(tmp_path / "folder"),
           "through-a-file": str(tmp_path / "notes.txt" / "cert.json")}.get(target, target)
    before = sorted(os.listdir(tmp_path))
    code, out_text, err = cli(["certify-matrix", str(tmp_path / "cert.npy"), "--out", out],
                              capsys)
    assert code == 2 and out_text == "" and "--out" in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == before
    assert (tmp_path / "fifo").is_fifo() and (tmp_path / "folder").is_dir()
    assert (tmp_path / "notes.txt").read_text() == "kept\n"


@pytest.mark.skipif(not hasattr(os, "mknod") or os.geteuid() != 0, reason="mknod needs root")
def test_a_device_is_never_replaced_by_a_file_output(tmp_path: Path) -> None:
    import stat

    device = tmp_path / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    with pytest.raises(PacplanError, match="not a regular file"):
        refuse_overwriting(device, "--plot", file=True)
    assert device.is_char_device()
    refuse_overwriting(tmp_path / "new.png", "--plot", file=True)  # a new file is fine
    (tmp_path / "old.png").write_bytes(b"png")
    refuse_overwriting(tmp_path / "old.png", "--plot", file=True)  # … and a regular one


@pytest.mark.parametrize("kind", ["file", "fifo"])
def test_data_cache_that_is_not_a_folder_is_named(tmp_path: Path, kind: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--cache naming a file or FIFO said only 'File exists', naming no option."""
    cache = tmp_path / "cache"
    if kind == "file":
        cache.write_text("kept\n")
    else:
        os.mkfifo(cache)
    code, _, err = cli(["data", "paper", "--cache", str(cache), "--url",
                        "file:///nonexistent/pacplan"], capsys)
    assert code == 2 and "--cache" in err and "not a folder" in err, err
    assert len(err.strip().splitlines()) == 1
    assert cache.read_text() == "kept\n" if kind == "file" else cache.is_fifo()


def test_certificate_save_follows_the_rule_in_python(planner_dir: Path, run_dir: Path,
                                                     tmp_path: Path) -> None:
    """`Certificate.save` wrote anywhere (into a planner or run directory, over a FIFO): it
    follows the rule `certify-matrix --out` follows, but lets a run that holds its directory's
    lock write its own certificates there."""
    import pacplan
    from pacplan.pipeline.lock import hold

    np.save(tmp_path / "cert.npy", np.random.default_rng(0).random((40, 4)))
    cert = pacplan.certify(tmp_path / "cert.npy")
    os.mkfifo(tmp_path / "fifo")
    for folder, kind in ((run_dir, "run"), (planner_dir, "planner")):
        before = _tree(folder)
        out = folder / "certificates" / "N40.json"
        with pytest.raises(PacplanError) as info:
            cert.save(out)
        assert str(info.value).startswith(f"path {out} is inside the {kind} directory {folder}")
        assert _tree(folder) == before and not (folder / "certificates").exists()
    with pytest.raises(PacplanError, match="not a regular file"):
        cert.save(tmp_path / "fifo")
    assert (tmp_path / "fifo").is_fifo()
    with hold(run_dir, run_dir / "run.lock"):  # the run itself, writing its certificate
        cert.save(run_dir / "certificates" / "N40.json")
    assert pacplan.verify(run_dir / "certificates" / "N40.json").certified == cert.certified


def test_the_names_a_run_writes_are_rundirs() -> None:
    """`RUN_WRITES` (io, below run) lists every top-level name RunDir writes."""
    from pacplan.io.outputs import RUN_WRITES
    from pacplan.pipeline.rundir import RunDir

    names = {v.split("/")[0] for k, v in vars(RunDir).items()
             if k.isupper() and isinstance(v, str)}
    assert names | set(RunDir.WRITTEN) <= RUN_WRITES
