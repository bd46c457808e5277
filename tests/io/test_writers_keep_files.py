"""No writer destroys what it did not make: every command that writes, given an output that is a
folder holding someone's files, the working folder `.`, its own input, or the folder holding
its input, leaves every file that was there with the same bytes (refused in one line before it
creates or deletes anything, or, where writing there is the command's job, adding only its own).

The oracle is the workspace itself: every file's bytes read before the command and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from helpers import SMALL_TOY_RUN, cli, onnx_linear
from pacplan.errors import PacplanError

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

CASES = ("nonempty", "dot", "input", "parent")
"""Where the output points: a folder of the user's files, `.`, the input, the input's folder."""

GYM_RUN = {
    "name": "gym-writers",
    "world": {"name": "gym", "options": {"env_id": "CartPole-v1", "policy": "linear",
                                         "horizon": 10, "return_bounds": [0, 10]}},
    "seeds": {"prior": [0, 100], "cert": [10_000, 10_020], "test": [20_000, 20_010]},
    "es": {"iterations": 1, "envs_per_iter": 2, "pairs_per_env": 1, "seed": 1},
    "executor": {"kind": "serial", "chunk_policies": 8, "chunk_seeds": 20},
    "policies": {"m": 3, "seed": 3},
    "certificate": {"n": [20], "delta": 0.05},
    "report": {"trajectories": 0},
}
"""An exportable run of a second or two (the toy world has no planner runtime)."""


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (symlinks not followed) by relative path, with its bytes."""
    found = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = Path(root) / name
            found[path.relative_to(folder).as_posix()] = path.read_bytes()
    return found


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Inputs made once: a gym run, its planner, a certify-policy folder, costs, an ONNX policy."""
    from pacplan.config import parse_config
    from pacplan.export import export_planner
    from pacplan.pipeline.pipeline import run
    from pacplan.pipeline.rundir import RunDir

    base = tmp_path_factory.mktemp("made")
    with RunDir(base / "run").locked():
        run(parse_config(GYM_RUN), base / "run", progress=False)
    export_planner(base / "run", base / "planner")
    onnx = base / "policy.onnx"
    onnx_linear(onnx, 4, 2)
    cert = subprocess.run(
        [sys.executable, "-m", "pacplan", "certify-policy", "CartPole-v1", str(onnx),
         "--return-bounds", "0,10", "--horizon", "10", "--n", "20", "--out",
         str(base / "certified")], capture_output=True, text=True, timeout=300)
    assert cert.returncode == 0, cert.stderr
    (base / "costs.csv").write_text("cost\n" + "0.1\n0.0\n" * 10)
    (base / "toy.yaml").write_text(yaml.safe_dump(SMALL_TOY_RUN))
    return {"run": base / "run", "planner": base / "planner", "certified": base / "certified",
            "onnx": onnx, "costs": base / "costs.csv", "toy": base / "toy.yaml"}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's working folder: their own files, a folder of them, and an inputs/ folder."""
    (tmp_path / "mine.py").write_text("print('the user's own script')\n")
    keep = tmp_path / "keep"
    (keep / "sub").mkdir(parents=True)
    (keep / "notes.txt").write_text("keep me\n")
    (keep / "sub" / "data.bin").write_bytes(bytes(range(256)))
    (tmp_path / "inputs").mkdir()
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def _input(made: dict[str, Path], workspace: Path, name: str) -> Path:
    """A copy of a made input inside the workspace's inputs/ folder."""
    src, dst = made[name], workspace / "inputs" / made[name].name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    return dst


def _out(case: str, workspace: Path, given: Path) -> str:
    return {"nonempty": "keep", "dot": ".", "input": str(given.relative_to(workspace)),
            "parent": str(given.parent.relative_to(workspace))}[case]


def _refused(code: int, err: str) -> None:
    assert code != 0
    message = err.strip()
    assert message and "\n" not in message and "Traceback" not in message, err


def _kept(before: dict[str, bytes], after: dict[str, bytes], may_add: Callable[[str], bool]
          ) -> None:
    """Every file there before is there with its bytes; anything new is the command's own."""
    lost = [p for p in before if p not in after]
    changed = [p for p in before if p in after and after[p] != before[p]]
    assert not lost and not changed, f"lost {lost[:5]}, changed {changed[:5]}"
    added = [p for p in after if p not in before and not may_add(p)]
    assert not added, f"created {added[:5]}"


def _nothing(_: str) -> bool:
    return False


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("what", ["run", "certified"])
def test_export(made: dict[str, Path], workspace: Path, case: str, what: str,
                capsys: pytest.CaptureFixture[str]) -> None:
    given = _input(made, workspace, what)
    before = tree(workspace)
    code, _, err = cli(["export", str(given.relative_to(workspace)), "--out",
                        _out(case, workspace, given)], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)


def test_export_refused_in_an_empty_working_folder_leaves_it_empty(
        made: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """`--out .` in an empty folder is a new planner's place; a refusal there (a run that does
    not export) leaves the folder as it was, and so does a success's counterpart: the folder."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    code, _, err = cli(["export", str(made["planner"]), "--out", "."], capsys)
    _refused(code, err)
    assert list(empty.iterdir()) == []
    code, _, err = cli(["export", str(made["run"]), "--out", "."], capsys)
    assert code == 0, err
    assert (empty / "planner.json").is_file() and (empty / "manifest.json").is_file()


def test_export_that_fails_midway_removes_only_its_own(
        made: dict[str, Path], workspace: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A failure after writing began (a full disk) removes what this call wrote, no more: a
    new folder and the parents it made go; nothing else is touched."""
    import pacplan.export.write as write

    def full_disk(*_: Any, **__: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(write, "save_safetensors", full_disk)
    given = _input(made, workspace, "run")
    before = tree(workspace)
    code, _, err = cli(["export", str(given.relative_to(workspace)), "--out",
                        "new/deeper/planner"], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)
    assert not (workspace / "new").exists()


@pytest.mark.parametrize("case", CASES)
def test_run(made: dict[str, Path], workspace: Path, case: str,
             capsys: pytest.CaptureFixture[str]) -> None:
    given = _input(made, workspace, "toy")
    before = tree(workspace)
    code, _, err = cli(["run", str(given.relative_to(workspace)), "--quiet", "--out",
                        _out(case, workspace, given)], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)


def test_a_run_refused_after_it_began_removes_only_its_own(
        made: dict[str, Path], workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run refused once it made its scaffold (a prior that is not one) removes its folder and
    the parents it made, and nothing else."""
    given = _input(made, workspace, "toy")
    (workspace / "inputs" / "bad.safetensors").write_bytes(b"not a prior")
    before = tree(workspace)
    code, _, err = cli(["run", str(given.relative_to(workspace)), "--quiet", "--prior",
                        "inputs/bad.safetensors", "--out", "new/deeper/run"], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)
    assert not (workspace / "new").exists()


@pytest.mark.parametrize("case", CASES)
def test_train_prior(made: dict[str, Path], workspace: Path, case: str,
                     capsys: pytest.CaptureFixture[str]) -> None:
    given = _input(made, workspace, "toy")
    before = tree(workspace)
    code, _, err = cli(["train-prior", str(given.relative_to(workspace)), "--quiet", "--out",
                        _out(case, workspace, given)], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)


@pytest.mark.parametrize("case", CASES)
def test_certify_policy(made: dict[str, Path], workspace: Path, case: str,
                        capsys: pytest.CaptureFixture[str]) -> None:
    given = _input(made, workspace, "onnx")
    before = tree(workspace)
    code, _, err = cli(["certify-policy", "CartPole-v1", str(given.relative_to(workspace)),
                        "--return-bounds", "0,10", "--horizon", "10", "--n", "20", "--out",
                        _out(case, workspace, given)], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)


@pytest.mark.parametrize("case", CASES)
def test_monitor_plot(made: dict[str, Path], workspace: Path, case: str,
                      capsys: pytest.CaptureFixture[str]) -> None:
    given = _input(made, workspace, "costs")
    before = tree(workspace)
    code, _, err = cli(["monitor", str(made["planner"]), str(given.relative_to(workspace)),
                        "--plot", _out(case, workspace, given)], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)


@pytest.mark.parametrize("case", CASES)
def test_report(made: dict[str, Path], workspace: Path, case: str,
                capsys: pytest.CaptureFixture[str]) -> None:
    """`report` writes into the run it reports on, and nowhere else: given its own run it adds
    report files and changes no other file; given anything else it is refused."""
    given = _input(made, workspace, "run")
    before = tree(workspace)
    code, _, err = cli(["report", _out(case, workspace, given)], capsys)
    if case != "input":
        _refused(code, err)
        _kept(before, tree(workspace), _nothing)
        return
    assert code == 0, err
    own = ("inputs/run/report.md", "inputs/run/report.html", "inputs/run/figures/",
           "inputs/run/run.lock")  # the lock: who holds the run (pid, host, start)
    after = tree(workspace)
    for path in own:  # rewritten by design
        for p in [p for p in before if p.startswith(path)]:
            before.pop(p)
            after.pop(p, None)
    _kept(before, after, lambda p: p.startswith(own))


@pytest.mark.parametrize("case", CASES)
def test_certify_matrix(workspace: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    given = workspace / "inputs" / "costs.npy"
    np.save(given, np.random.default_rng(0).uniform(size=(30, 4)))
    before = tree(workspace)
    code, _, err = cli(["certify-matrix", str(given.relative_to(workspace)), "--out",
                        _out(case, workspace, given)], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)


@pytest.mark.parametrize("case", CASES)
def test_render(workspace: Path, case: str, capsys: pytest.CaptureFixture[str]) -> None:
    given = workspace / "inputs" / "theta.npy"
    np.save(given, np.zeros(5))
    before = tree(workspace)
    code, _, err = cli(["render", "uav", "--seed", "0", "--theta",
                        str(given.relative_to(workspace)), "--out",
                        _out(case, workspace, given)], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)


@pytest.mark.parametrize("case", CASES)
def test_certificate_save(made: dict[str, Path], workspace: Path, case: str) -> None:
    from pacplan.pacbayes.certificate import build_certificate
    from pacplan.pacbayes.matrices import load_cost_matrix

    given = workspace / "inputs" / "cert.npy"
    np.save(given, np.random.default_rng(0).uniform(size=(30, 4)))
    c = build_certificate(load_cost_matrix(given, name=str(given)), 0.05)
    before = tree(workspace)
    with pytest.raises(PacplanError) as info:
        c.save(_out(case, workspace, given))
    assert "\n" not in str(info.value)
    _kept(before, tree(workspace), _nothing)


@pytest.mark.parametrize("case", CASES)
def test_data_minitaur_prior(made: dict[str, Path], workspace: Path, case: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    given = workspace / "inputs" / "mu_minitaur_best.npy"
    given.write_bytes(b"not the paper's file")
    before = tree(workspace)
    code, _, err = cli(["data", "minitaur-prior", _out(case, workspace, given)], capsys)
    _refused(code, err)
    _kept(before, tree(workspace), _nothing)


@pytest.mark.parametrize("case", CASES)
def test_data_paper_cache(workspace: Path, case: str, capsys: pytest.CaptureFixture[str]
                          ) -> None:
    """`--cache` is a folder the paper's files are added to: a folder of the user's files and
    `.` keep theirs; the source folder itself (a file:// mirror) is refused. The mirror here
    holds wrong bytes, so nothing is downloaded and only refusals and keeping are shown."""
    mirror = workspace / "inputs" / "mirror"
    mirror.mkdir()
    (mirror / "C_quadrotor.npy").write_bytes(b"not the paper's bytes")
    out = {"nonempty": "keep", "dot": ".", "input": "inputs/mirror", "parent": "inputs"}[case]
    before = tree(workspace)
    code, _, err = cli(["data", "paper", "--url", mirror.as_uri(), "--cache", out,
                        "--timeout", "5"], capsys)
    _refused(code, err)
    if case == "input":
        assert "is the input --url" in err, err
    _kept(before, tree(workspace), _nothing)


def test_the_matrix_covers_every_writer() -> None:
    """Each command with an output option has its test here (a new writer needs one)."""
    names = {n.removeprefix("test_") for n in globals() if n.startswith("test_")}
    for writer in ("export", "run", "train_prior", "certify_policy", "monitor_plot", "report",
                   "certificate_save", "data_minitaur_prior", "data_paper_cache",
                   "certify_matrix", "render"):
        assert writer in names, writer
