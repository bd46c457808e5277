"""`pacplan verify` re-hashes every file a certify-policy certificate records, where it lies
relative to the certificate's folder, and never prints a plain OK for what it could not check.

Before: an edited policy, cost or environment module behind a certificate verified OK (the
certificate held their sha256, verify never recomputed them); a moved policy file and an
unidentified object (a lambda) got the same plain OK; and a planner passed or failed depending
on a file at the certificate's absolute path on the machine that made it."""

from __future__ import annotations

import shutil
import sys
import textwrap
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import pacplan
from helpers import cli, onnx_linear
from pacplan.errors import NotCheckedWarning, PacplanError
from pacplan.policy_certification import certify_policy

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

ENV = """\
import gymnasium as gym
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

gym.register("Rechecked-v0", entry_point=CartPoleEnv, max_episode_steps=30)
"""
HELPER = "THRESHOLD = 0.0\n"
POLICY = """\
from rc_helper import THRESHOLD


def act(obs):
    return int(obs[2] > THRESHOLD)
"""
COST = """\
def cost(episode):
    return 0.0 if episode.length >= 30 else 1.0
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's folder: an environment module, a policy importing a helper, a cost module,
    VecNormalize statistics and an .onnx policy; certified into project/runs/cert."""
    root = tmp_path / "project"
    root.mkdir()
    for name, text in (("rc_env", ENV), ("rc_helper", HELPER), ("rc_policy", POLICY),
                       ("rc_cost", COST)):
        (root / f"{name}.py").write_text(textwrap.dedent(text))
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delitem(gym.registry, "Rechecked-v0", raising=False)
    monkeypatch.syspath_prepend(str(root))
    np.savez(root / "stats.npz", mean=np.zeros(4), var=np.ones(4), clip_obs=10.0,
             epsilon=1e-8)
    onnx_linear(root / "policy.onnx", 4, 2)
    certify_policy("rc_env:Rechecked-v0", ["rc_policy:act", str(root / "policy.onnx")], n=6,
                   cost="rc_cost:cost", obs_normalization=root / "stats.npz",
                   out=root / "runs" / "cert")
    return root


def _verify(folder: Path, capsys: pytest.CaptureFixture[str], *flags: str
            ) -> tuple[int, str, str]:
    code, out, err = cli(["verify", *flags, str(folder / "certificate.json")], capsys)
    return code, " ".join(out.split()), " ".join(err.split())


def test_every_recorded_file_is_rehashed(project: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    cert = project / "runs" / "cert"
    record = pacplan.verify(cert / "certificate.json").provenance["certify_policy"]
    recorded = {Path(e["path"]).name for e in record["files"] + record["policy_files"]}
    assert recorded == {"rc_env.py", "rc_helper.py", "rc_policy.py", "rc_cost.py",
                        "stats.npz", "policy.onnx"}
    assert all(not Path(e["path"]).is_absolute() for e in record["files"])
    code, out, _ = _verify(cert, capsys)
    assert code == 0 and out.startswith("OK ") and "not checked" not in out


@pytest.mark.parametrize("name", ["rc_env.py", "rc_helper.py", "rc_policy.py", "rc_cost.py",
                                  "stats.npz", "policy.onnx"])
def test_an_edited_input_fails_naming_it(project: Path, name: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = project / name
    path.write_bytes(path.read_bytes() + b"\n# edited\n")
    code, out, err = _verify(project / "runs" / "cert", capsys)
    assert code == 2 and not out, out
    assert f"{path} has changed since it was certified" in err, err


def test_a_copy_with_its_surroundings_checks_its_own_files(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Paths are relative to the folder: a copy checks the copy's files, not the original's."""
    copy = Path(shutil.copytree(project, tmp_path / "elsewhere"))
    (project / "rc_cost.py").write_text("def cost(episode):\n    return 1.0\n")
    assert _verify(copy / "runs" / "cert", capsys)[0] == 0
    (copy / "rc_helper.py").write_text("THRESHOLD = 0.5\n")
    code, _, err = _verify(copy / "runs" / "cert", capsys)
    assert code == 2 and f"{copy / 'rc_helper.py'} has changed" in err, err


def test_a_missing_file_is_named_not_called_ok(project: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (project / "policy.onnx").rename(project / "moved.onnx")
    code, out, _ = _verify(project / "runs" / "cert", capsys)
    assert code == 0 and out.startswith("OK for what could be checked"), out
    assert f"policy file {project / 'policy.onnx'} not found: not checked" in out, out
    code, out, err = _verify(project / "runs" / "cert", capsys, "--strict")
    assert code == 1 and "1 item could not be checked (--strict)" in err, err
    with pytest.warns(NotCheckedWarning, match="policy.onnx not found: not checked"):
        pacplan.verify(project / "runs" / "cert" / "certificate.json")
    with pytest.raises(PacplanError, match=r"could not be checked \(strict\)"):
        pacplan.verify(project / "runs" / "cert" / "certificate.json", strict=True)


def test_an_unidentified_object_is_named(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pacplan.UnidentifiedInputWarning)
        certify_policy("CartPole-v1", [lambda obs: int(obs[2] > 0)], n=4, cost="terminated",
                       horizon=20, out=tmp_path / "cert")
    code, out, _ = _verify(tmp_path / "cert", capsys)
    assert code == 0 and "OK for what could be checked" in out, out
    assert "policy #0 is an unidentified Python object (its state is in no file): its rows "\
           "cannot be re-derived" in out, out
    assert _verify(tmp_path / "cert", capsys, "--strict")[0] == 1


def test_a_planner_does_not_depend_on_the_machine_that_made_it(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The planner ships the certified model: the policy file the certificate names, edited
    or gone, changes nothing about whether the planner verifies."""
    onnx_linear(tmp_path / "only.onnx", 4, 2)
    certify_policy("CartPole-v1", [str(tmp_path / "only.onnx")], n=5, cost="terminated",
                   horizon=20, out=tmp_path / "cert")
    assert cli(["export", str(tmp_path / "cert"), "--out", str(tmp_path / "planner")],
               capsys)[0] == 0
    (tmp_path / "only.onnx").write_bytes(b"changed")
    assert cli(["verify", str(tmp_path / "planner")], capsys)[0] == 0
    (tmp_path / "only.onnx").unlink()
    assert cli(["verify", str(tmp_path / "planner")], capsys)[0] == 0


def test_a_certificate_out_of_its_folder_says_what_was_left_unchecked(
        project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(project / "runs" / "cert" / "certificate.json", lone)
    shutil.copytree(project / "runs" / "cert" / "costs", lone / "costs")
    code, out, _ = _verify(lone, capsys)
    assert code == 0 and out.startswith("OK for what could be checked"), out
    assert "no certify-policy.json beside it" in out, out
