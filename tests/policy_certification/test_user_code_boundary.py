"""The boundary to user code and user data (issue 50): modules beside a model never shadow the
libraries, any exception or `sys.exit` of a policy, cost or environment is one line (exit 2),
every action and every environment output is checked by type before it counts, bounds that
overflow are refused, a resumed run notices a changed helper module, and a failed write leaves
no half-made folder behind."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import user_faults
from helpers import cli
from pacplan.errors import PacplanError
from pacplan.policy_certification import certify_policy

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

FIRST = 1_000_000
PACPLAN = Path(sys.executable).with_name("pacplan")


def _linear_onnx(path: Path, obs_dim: int, actions: int) -> Path:
    """An ONNX Gemm policy built with onnx's helpers (no torch): scores = obs · W + b."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    w = np.zeros((obs_dim, actions), np.float32)
    w[2, 1] = 1.0  # CartPole: push right when the pole leans right
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["obs", "w", "b"], ["scores"])], "policy",
        [helper.make_tensor_value_info("obs", TensorProto.FLOAT, [1, obs_dim])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, actions])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.zeros(actions, np.float32),
                                                                 "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


# ---------------------------------------------------------------- the working folder
def test_modules_beside_a_model_never_shadow_the_libraries(tmp_path: Path) -> None:
    """A `torch.py`, `onnxruntime.py` or `numpy.py` beside a downloaded model is never imported
    (it would run its author's code); the user's own module there is still found."""
    pytest.importorskip("onnxruntime")
    marker = tmp_path / "HACKED"
    for name in ("torch", "onnxruntime", "numpy", "gymnasium"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name} ')\n")
    (tmp_path / "mine.py").write_text("def act(obs):\n    return int(obs[2] > 0)\n")
    _linear_onnx(tmp_path / "model.onnx", 4, 2)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([str(PACPLAN), "certify-policy", "CartPole-v1", "model.onnx",
                           "mine:act", "--n", "3", "--cost", "terminated", "--out", "cert",
                           "--quiet"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cert" / "certificate.json").is_file()


# ---------------------------------------------------------------- user code that fails
@pytest.fixture
def user_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder of the user's modules on sys.path (each test names its own modules)."""
    folder = tmp_path / "usercode"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.mark.parametrize(("args", "words"), [
    (["CartPole-v1", "user_faults:exits", "--cost", "terminated"],
     ["policy user_faults:exits failed on seed 1000000 at step 0", "SystemExit(0)"]),
    (["CartPole-v1", "user_faults:zero", "--cost", "user_faults:exits_cost"],
     ["cost function user_faults:exits_cost raised SystemExit(0) on seed 1000000"]),
    (["CartPole-v1", "user_faults:zero", "--cost", "user_faults:huge_cost"],
     ["user_faults:huge_cost returned inf on seed 1000000", "outside [0, 1]"]),
    (["FAULTY:exit-in-step", "user_faults:zero", "--cost", "terminated"],
     ["(policy user_faults:zero) on seed 1000000 at step 0: refused action 0",
      "SystemExit(0)"]),
])
def test_user_code_that_fails_or_exits_is_one_line_exit_2(
        tmp_path: Path, args: list[str], words: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    ids = user_faults.register_faulty()
    args = [ids[a.partition(":")[2]] if a.startswith("FAULTY:") else a for a in args]
    out = tmp_path / "out"
    code, _, err = cli(["certify-policy", *args, "--n", "4", "--out", str(out),
                       "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


@pytest.mark.parametrize(("source", "words"), [
    ("def act(obs):\n    return 0 +\n", ["importing broken_syntax failed at",
                                          "broken_syntax.py:2", "SyntaxError"]),
    ("raise RuntimeError('no GPU here')\n", ["importing raises_on_import failed",
                                            "RuntimeError: no GPU here"]),
    ("import sys\nsys.exit(3)\n", ["importing exits_on_import failed", "SystemExit(3)"]),
])
def test_a_user_module_that_cannot_be_imported_is_one_line(
        user_dir: Path, tmp_path: Path, source: str, words: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    name = words[0].split()[1]
    (user_dir / f"{name}.py").write_text(source)
    for spec in ([f"{name}:act", "--cost", "terminated"],
                 ["user_faults:zero", "--cost", f"{name}:act"]):
        code, _, err = cli(["certify-policy", "CartPole-v1", *spec, "--n", "3", "--out",
                            str(tmp_path / "out"), "--quiet"], capsys)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert all(w in lines[0] for w in words), lines[0]
        assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- actions
@pytest.mark.parametrize(("env_id", "policy", "words"), [
    ("Pendulum-v1", "nan_torque", ["action array([nan]", "is not finite"]),
    ("Pendulum-v1", "inf_torque", ["is not finite"]),
    ("Pendulum-v1", "strong_torque", ["is outside the action space Box(-2.0, 2.0",
                                      "--clip-actions"]),
    ("Pendulum-v1", "two_torques", ["has shape (2,); Box(-2.0, 2.0, (1,), float32) needs (1,)"]),
    ("Pendulum-v1", "scalar_torque", ["has shape ()"]),
    ("Pendulum-v1", "string_torque", ["has dtype <U3", "needs real numbers"]),
    ("CartPole-v1", "float_push", ["action 1.0 (float) is not an integer"]),
    ("CartPole-v1", "bool_push", ["action True (bool) is not an integer"]),
    ("CartPole-v1", "array_push", ["(ndarray) is not an integer"]),
    ("CartPole-v1", "far_push", ["action 7 is outside Discrete(2)"]),
])
def test_every_action_is_checked_before_the_environment_sees_it(
        tmp_path: Path, env_id: str, policy: str, words: list[str]) -> None:
    with pytest.raises(PacplanError) as info:
        certify_policy(env_id, [f"user_faults:{policy}"], n=3, cost="terminated", horizon=5,
                       out=tmp_path / "out")
    message = str(info.value)
    assert "\n" not in message
    assert f"policy user_faults:{policy} on seed {FIRST} at step 0" in message, message
    assert all(w in message for w in words), message
    assert not (tmp_path / "out").exists()


def test_clipped_actions_are_asked_for_recorded_and_certified_as_clipped(tmp_path: Path) -> None:
    """With clip_actions the policy that asks for 5 N·m is certified as the one that gets the
    space's 2 N·m: the same costs as a policy that asks for 2, and the stamp says so."""
    logged: list[str] = []
    bounds = {"reward_bounds": [-16.2736044, 0.0], "horizon": 20}
    clipped = certify_policy("Pendulum-v1", ["user_faults:strong_torque"], n=4,
                             clip_actions=True, out=tmp_path / "clipped", log=logged.append,
                             **bounds)
    exact = certify_policy("Pendulum-v1", ["user_faults:max_torque"], n=4,
                           out=tmp_path / "exact", **bounds)
    np.testing.assert_array_equal(np.load(tmp_path / "clipped" / "costs" / "cert.npy"),
                                  np.load(tmp_path / "exact" / "costs" / "cert.npy"))
    assert clipped.inputs["actions"] == "clipped into the action space"
    assert "actions" not in exact.inputs
    assert any("80 certification actions were outside the action space" in m for m in logged)


# ---------------------------------------------------------------- environment outputs
@pytest.mark.parametrize(("fault", "cost", "words"), [
    ("array-reward", "terminated", ["reward array([1., 2.]) (ndarray) is not a real number"]),
    ("none-reward", "terminated", ["reward None (NoneType) is not a real number"]),
    ("complex-reward", "terminated", ["reward (1+2j) (complex) is not a real number"]),
    ("string-reward", "terminated", ["reward '1.0' (str) is not a real number"]),
    ("nan-reward", "terminated", ["reward nan is not finite"]),
    ("array-terminated", "terminated", ["terminated array([False, True]) (ndarray) is not a "
                                        "bool"]),
    ("int-terminated", "terminated", ["terminated 0 (int) is not a bool"]),
    ("info-none", "terminated", ["info None (NoneType) is not a dict"]),
    ("short-step", "terminated", ["expected 5, got 4"]),  # Gymnasium's TimeLimit unpacks it
    ("nan-observation", "terminated", ["at step 1: observation array([nan, 0.]", "holds NaN"]),
    ("success-string", "success", ["info['is_success'] is 'False' (str), not a success flag"]),
    ("success-array", "success", ["info['is_success'] is array([ True, False])"]),
    ("success-half", "success", ["info['is_success'] is 0.5 (float)"]),
])
def test_every_environment_output_is_checked_by_type(tmp_path: Path, fault: str, cost: str,
                                                      words: list[str]) -> None:
    env_id = user_faults.register_faulty()[fault]
    with pytest.raises(PacplanError) as info:
        certify_policy(env_id, ["user_faults:zero"], n=3, cost=cost, out=tmp_path / "out")
    message = str(info.value)
    assert "\n" not in message and "on seed 1000000" in message, message
    assert all(w in message for w in words), message
    assert not (tmp_path / "out").exists()


def test_the_gym_world_checks_the_same_outputs(tmp_path: Path) -> None:
    """pacplan's own policies on a user's environment get the same checks."""
    from pacplan.worlds.from_gym.world import GymWorld

    ids = user_faults.register_faulty()
    theta = np.zeros((1, 6), np.float32)
    for fault, words in (("string-reward", "reward '1.0' (str) is not a real number"),
                         ("array-terminated", "is not a bool"),
                         ("exit-in-step", "SystemExit(0)")):
        world = GymWorld(ids[fault], cost="terminated")
        with pytest.raises(PacplanError, match=r"on seed 7 at step 0") as info:
            world.costs(theta, np.array([7]))
        assert words in str(info.value)


# ---------------------------------------------------------------- declared numbers
@pytest.mark.parametrize(("options", "words"), [
    ({"return_bounds": [-1e308, 1e308]}, "--return-bounds [-1e+308, 1e+308] span more than a "
                                         "float holds"),
    ({"reward_bounds": [-1e306, 1e306]}, "over 500 steps give returns that span more than a "
                                         "float holds"),
])
def test_bounds_whose_span_overflows_are_refused(tmp_path: Path, options: dict,
                                                 words: str) -> None:
    """Finite bounds with an infinite span made every cost 0 (a certificate of 0 %)."""
    from pacplan.policy_certification.names import CLI

    with pytest.raises(PacplanError) as info:
        certify_policy("CartPole-v1", ["user_faults:zero"], n=3, out=tmp_path / "o",
                       names=CLI, **options)
    assert words in str(info.value)


@pytest.mark.parametrize(("argument", "value", "words"), [
    ("success_needs_terminated", "no", "success_needs_terminated must be True or False, got 'no'"),
    ("clip_actions", 1, "clip_actions must be True or False, got 1"),
    ("delta", 10**400, "delta must be"),
], ids=["success_needs_terminated", "clip_actions", "delta"])
def test_python_arguments_are_checked_by_type(tmp_path: Path, argument: str, value: object,
                                              words: str) -> None:
    kwargs: dict = {"cost": "success"} if argument == "success_needs_terminated" else {
        "cost": "terminated"}
    with pytest.raises(PacplanError, match=words.replace("(", r"\(")):
        certify_policy("CartPole-v1", ["user_faults:zero"], n=3, out=tmp_path / "o",
                       **kwargs, **{argument: value})
    assert not (tmp_path / "o").exists()


def test_out_defaults_to_the_folder_the_command_line_uses(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = certify_policy("CartPole-v1", ["user_faults:zero"], n=3, cost="terminated")
    assert result.out == Path("runs") / "certify-CartPole-v1"
    assert (tmp_path / "runs" / "certify-CartPole-v1" / "certificate.json").is_file()


# ---------------------------------------------------------------- resuming user code
def test_a_resume_notices_a_changed_helper_module(user_dir: Path, tmp_path: Path) -> None:
    """The identity covers every user file a policy, a cost or an environment imports."""
    (user_dir / "steer_helper.py").write_text("LEAN = 0.0\n")
    (user_dir / "steer.py").write_text(textwrap.dedent("""\
        from steer_helper import LEAN


        def act(obs):
            return int(obs[2] > LEAN)
        """))
    (user_dir / "judge_tools.py").write_text("LIMIT = 20\n")
    (user_dir / "judge.py").write_text(textwrap.dedent("""\
        import judge_tools


        def cost(episode):
            return float(episode.length < judge_tools.LIMIT)
        """))
    (user_dir / "myenvs").mkdir()
    (user_dir / "myenvs" / "__init__.py").write_text("from .pole import Pole\n")
    (user_dir / "myenvs" / "pole.py").write_text(textwrap.dedent("""\
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv

        from . import physics


        class Pole(CartPoleEnv):
            def __init__(self, **kwargs):
                super().__init__(**kwargs)
                self.length = physics.LENGTH
        """))
    (user_dir / "myenvs" / "physics.py").write_text("LENGTH = 0.5\n")
    gym.register("pacplan-test/Pole-v0", entry_point="myenvs:Pole", max_episode_steps=50)
    args = {"n": 3, "cost": "judge:cost", "out": tmp_path / "out"}
    certify_policy("pacplan-test/Pole-v0", ["steer:act"], **args)
    certify_policy("pacplan-test/Pole-v0", ["steer:act"], **args)  # unchanged: resumes
    for path, text, field in ((user_dir / "steer_helper.py", "LEAN = 0.1\n", "policies"),
                              (user_dir / "judge_tools.py", "LIMIT = 30\n", "cost"),
                              (user_dir / "myenvs" / "physics.py", "LENGTH = 0.6\n",
                               "env")):
        old = path.read_text()
        path.write_text(text)
        with pytest.raises(PacplanError, match=rf"holds a certify-policy run of other inputs "
                                               rf"\({field}[.\w]* was"):
            certify_policy("pacplan-test/Pole-v0", ["steer:act"], **args)
        path.write_text(old)
    certify_policy("pacplan-test/Pole-v0", ["steer:act"], **args)  # all restored: resumes


# ---------------------------------------------------------------- failed writes
def test_a_failed_write_leaves_no_half_made_folder(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A full disk in the middle of the rollouts: one line, exit 2, nothing left that would
    block the rerun; the rerun then works."""
    from pacplan.pipeline.execution import chunks

    real = chunks.ChunkStore.save
    calls = []

    def full_disk(self: object, *args: object, **kwargs: object) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(chunks.ChunkStore, "save", full_disk)
    out = tmp_path / "out"
    argv = ["certify-policy", "CartPole-v1", "user_faults:zero", "--cost", "terminated", "--n",
            "25", "--out", str(out), "--quiet"]
    code, _, err = cli(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "No space left" in err, err
    assert not out.exists()
    code, _, err = cli(argv, capsys)
    assert code == 0, err
    assert (out / "certificate.json").is_file()


def test_a_folder_stopped_before_its_stamp_does_not_block_the_rerun(tmp_path: Path) -> None:
    """Ctrl-C between taking the lock and writing the stamp leaves only the lock file."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "certify-policy.lock").write_text("")
    result = certify_policy("CartPole-v1", ["user_faults:zero"], n=3, cost="terminated",
                            out=out)
    assert result.certificate_path.is_file()
