"""A user's own environment on the command line and in Python (issue 51): 'module:EnvId' imports
the module that registers it first, as `gymnasium.make` does; `--env-kwargs` (JSON or
KEY=VALUE) reach the environment; the environment's identity (id, kwargs, Gymnasium's version,
its code's sha256) is recorded; and each way to get it wrong is one line."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from helpers import cli
from pacplan.errors import PacplanError
from pacplan.policy_certification import certify_policy

FIRST = 1_000_000


@pytest.fixture
def poles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A user module `user_poles` (not imported yet) registering `Poles-v0`: CartPole with a
    `length` kwarg (the pole's half length) that refuses anything but a positive number."""
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "user_poles.py").write_text(textwrap.dedent("""\
        import gymnasium as gym
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv


        class Poles(CartPoleEnv):
            def __init__(self, length=0.5, **kwargs):
                if not isinstance(length, int | float) or length <= 0:
                    raise ValueError(f"length must be a positive number, got {length!r}")
                super().__init__(**kwargs)
                self.length = length
                self.polemass_length = self.masspole * self.length


        gym.register("Poles-v0", entry_point=Poles, max_episode_steps=60)
        """))
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(gym.registry, "Poles-v0", raising=False)
    monkeypatch.delitem(sys.modules, "user_poles", raising=False)
    return "user_poles:Poles-v0"


def _lengths(env_id: str, kwargs: dict, seeds: range) -> list[int]:
    """Episode lengths of the `lean` policy in the raw environment (the oracle)."""
    import user_policies

    out = []
    for seed in seeds:
        env = gym.make(env_id, **kwargs)
        obs, _ = env.reset(seed=seed)
        steps, done = 0, False
        while not done:
            obs, _, terminated, truncated, _ = env.step(user_policies.lean(obs))
            steps, done = steps + 1, terminated or truncated
        out.append(steps)
    return out


def test_a_module_env_id_and_kwargs_from_the_command_line(
        poles: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, err = cli(["certify-policy", poles, "user_policies:lean", "--n", "8",
                        "--env-kwargs", '{"length": 2.0}', "--env-kwargs", "render_mode=null",
                        "--return-bounds", "0,60", "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    costs = np.load(out / "costs" / "cert.npy")[:, 0]
    lengths = _lengths("Poles-v0", {"length": 2.0}, range(FIRST, FIRST + 8))
    np.testing.assert_allclose(costs, [(60 - k) / 60 for k in lengths], atol=1e-12)
    assert lengths != _lengths("Poles-v0", {}, range(FIRST, FIRST + 8))  # the kwarg mattered
    stamp = json.loads((out / "certify-policy.json").read_text())["inputs"]["env"]
    assert stamp["id"] == poles and stamp["kwargs"] == {"length": 2.0, "render_mode": None}
    assert stamp["gymnasium"] == gym.__version__ and len(stamp["source_sha256"]) == 64


@pytest.mark.parametrize(("args", "words"), [
    (["user_poles:Poles-v0", "--env-kwargs", "length=-1"],
     ["cannot make 'user_poles:Poles-v0'", "length must be a positive number, got -1"]),
    (["user_poles:Poles-v0", "--env-kwargs", "colour=red"],
     ["cannot make 'user_poles:Poles-v0'", "colour"]),
    (["user_poles:Poles-v0", "--env-kwargs", "{not json"], ["--env-kwargs '{not json'",
                                                            "is not a JSON object"]),
    (["user_poles:Poles-v0", "--env-kwargs", "2=3"], ["must be a JSON object or KEY=VALUE"]),
    (["no_such_module_xyz:Poles-v0"], ["no module named 'no_such_module_xyz'"]),
    (["user_poles:Nope-v0"], ["ENV_ID 'user_poles:Nope-v0'", "Nope"]),
])
def test_a_user_environment_that_cannot_be_made_is_one_line(
        poles: str, tmp_path: Path, args: list[str], words: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code, _, err = cli(["certify-policy", args[0], "user_policies:lean", *args[1:], "--n", "3",
                        "--cost", "terminated", "--out", str(out), "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


def test_a_module_that_fails_to_register_its_environment_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad_envs.py").write_text("raise ImportError('needs box2d')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, _, err = cli(["certify-policy", "bad_envs:Thing-v0", "user_policies:lean", "--n", "3",
                        "--cost", "terminated", "--out", str(tmp_path / "o"), "--quiet"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "importing bad_envs failed (ImportError: needs box2d)" in err


def test_python_takes_an_env_spec_and_kwargs(poles: str, tmp_path: Path) -> None:
    import importlib

    importlib.import_module("user_poles")
    spec = gym.spec("Poles-v0")
    by_spec = certify_policy(spec, ["user_policies:lean"], n=5, cost="terminated",
                             env_kwargs={"length": 2.0}, out=tmp_path / "spec")
    by_id = certify_policy("Poles-v0", ["user_policies:lean"], n=5, cost="terminated",
                           env_kwargs={"length": 2.0}, out=tmp_path / "id")
    assert by_spec.inputs == by_id.inputs
    np.testing.assert_array_equal(np.load(tmp_path / "spec" / "costs" / "cert.npy"),
                                  np.load(tmp_path / "id" / "costs" / "cert.npy"))
    with pytest.raises(PacplanError, match=r"env_kwargs \{'length': array\(\[1\]\)\}: every "
                                           r"value must be JSON"):
        certify_policy("Poles-v0", ["user_policies:lean"], n=5, cost="terminated",
                       env_kwargs={"length": np.array([1])}, out=tmp_path / "x")
    with pytest.raises(PacplanError, match="env_id must be a Gymnasium environment id"):
        certify_policy(42, ["user_policies:lean"], n=5, cost="terminated",
                       out=tmp_path / "x")
    other = gym.envs.registration.EnvSpec("Poles-v0", entry_point="gymnasium.envs.classic_"
                                          "control.cartpole:CartPoleEnv")
    with pytest.raises(PacplanError, match="is not the one registered under its id"):
        certify_policy(other, ["user_policies:lean"], n=5, cost="terminated",
                       out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_the_command_names_the_policies_and_counts_for_0_1_costs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The winning policy is named; with 0/1 costs each one's k/N is printed beside it."""
    out = tmp_path / "out"
    code, stdout, err = cli(["certify-policy", "CartPole-v1", "user_policies:balance",
                             "user_policies:push_left", "--n", "20", "--test-n", "5", "--cost",
                             "terminated", "--horizon", "100", "--out", str(out), "--quiet"],
                            capsys)
    assert code == 0, err
    cert = np.load(out / "costs" / "cert.npy")
    words = " ".join(stdout.split())
    assert cert[:, 1].sum() == 20 and cert[:, 0].sum() < 20  # pushing left always falls
    assert (f"posterior weight 1.000: user_policies:balance, cost 1 in {int(cert[:, 0].sum())}/20 "
            "certification and") in words, words
    assert "push_left" not in words


def test_the_command_line_spells_bounds_as_its_flags_take_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(["certify-policy", "Pendulum-v1", "user_faults:max_torque", "--n", "3",
                        "--out", str(tmp_path / "o"), "--quiet"], capsys)
    assert code == 2
    assert "--return-bounds LO,HI is needed" in err and "--reward-bounds LO,HI per step" in err
    assert "R_min" not in err


def test_a_second_key_value_after_one_env_kwargs_is_named(
        poles: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--env-kwargs length=2.0 hard=1` puts `hard=1` among the policies: the error says to
    repeat the flag (it said `policy 'hard=1' … no such file`), and nothing is made."""
    code, _, err = cli(["certify-policy", poles, "user_policies:lean", "--env-kwargs",
                        "length=2.0", "hard=1", "--n", "8", "--return-bounds", "0,60",
                        "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "POLICY 'hard=1' looks like an environment keyword argument" in err
    assert "repeat it: --env-kwargs hard=1" in err
    assert not (tmp_path / "out").exists()


MISSION_ENV = textwrap.dedent("""\
    import gymnasium as gym
    import numpy as np
    from gymnasium import spaces


    class Mission(spaces.Space):
        '''Like MiniGrid's MissionSpace: strings gymnasium cannot flatten.'''

        def __init__(self):
            super().__init__(None, str)

        def contains(self, x):
            return isinstance(x, str)


    class Corridor(gym.Env):
        '''Walk right to the goal; the observation holds a mission text.'''

        def __init__(self, size=6):
            self.size = size
            self.observation_space = spaces.Dict({
                "pos": spaces.Box(0, size, (1,), np.float32), "mission": Mission()})
            self.action_space = spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            super().reset(seed=seed)
            self.pos = int(self.np_random.integers(0, self.size - 1))
            return self._obs(), {}

        def _obs(self):
            return {"pos": np.array([self.pos], np.float32), "mission": "reach the goal"}

        def step(self, action):
            self.pos = max(0, self.pos + (1 if action == 1 else -1))
            done = self.pos >= self.size - 1
            return self._obs(), float(done), done, False, {}


    gym.register("Corridor-v0", entry_point=Corridor, max_episode_steps=12)
    """)


def test_a_dict_observation_with_text_reaches_a_callable_raw(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MiniGrid's shape of observation (a Dict holding a mission string gymnasium cannot
    flatten): a callable gets it raw and is certified (it crashed in `flatdim`); an .onnx
    policy, which takes flattened observations, is one line naming the space and the way out."""
    (tmp_path / "user_corridor.py").write_text(MISSION_ENV)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(gym.registry, "Corridor-v0", raising=False)
    monkeypatch.delitem(sys.modules, "user_corridor", raising=False)
    seen: list[str] = []

    def walk_right(obs: dict) -> int:
        seen.append(obs["mission"])
        return 1

    from pacplan import UnidentifiedInputWarning

    with pytest.warns(UnidentifiedInputWarning):  # a closure: its state is in no file
        result = certify_policy("user_corridor:Corridor-v0", [walk_right], n=10,
                                cost="terminated", out=tmp_path / "ok")
    assert seen and set(seen) == {"reach the goal"}
    # cost "terminated" is 1 when an episode ends by itself: here, every one reached the goal
    assert np.load(result.certificate.cert_matrix.path).min() == 1.0
    onnx = tmp_path / "policy.onnx"
    onnx.write_bytes(b"unused: refused before it is read as a model")
    with pytest.raises(PacplanError) as info:
        certify_policy("user_corridor:Corridor-v0", [str(onnx)], n=10, cost="terminated",
                       out=tmp_path / "onnx")
    text = str(info.value)
    assert "\n" not in text and "cannot flatten the observation space Dict(" in text, text
    assert "certify a 'module:callable' policy" in text, text


def test_the_library_providing_the_env_is_recorded_and_a_resume_after_its_upgrade_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An env of an installed library (MiniGrid's, say) records that library's version in the
    certificate's identity, so rows of two versions never mix; and a `module:callable` policy
    is named in the certificate. The library here is a distribution of the test's own (a
    .dist-info beside its package), counted as a library, not as the user's code."""
    import pacplan.io.user_code as user_code

    lib = tmp_path / "site"
    (lib / "fakegrid").mkdir(parents=True)
    (lib / "fakegrid" / "__init__.py").write_text(textwrap.dedent("""\
        import gymnasium as gym
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv

        gym.register("FakeGrid-v0", entry_point=CartPoleEnv, max_episode_steps=30)
        """).replace("entry_point=CartPoleEnv", "entry_point='fakegrid.env:Pole'"))
    (lib / "fakegrid" / "env.py").write_text(
        "from gymnasium.envs.classic_control.cartpole import CartPoleEnv as Pole\n")
    info = lib / "fakegrid-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakegrid\nVersion: 1.0\n")
    (info / "RECORD").write_text("fakegrid/__init__.py,,\nfakegrid/env.py,,\n")
    monkeypatch.syspath_prepend(str(lib))
    monkeypatch.delitem(gym.registry, "FakeGrid-v0", raising=False)
    for name in ("fakegrid", "fakegrid.env"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    library = user_code.user_files
    monkeypatch.setattr(user_code, "user_files",
                        lambda module: [] if module.startswith("fakegrid") else library(module))
    args = {"n": 6, "return_bounds": (0, 30), "out": tmp_path / "out"}
    result = certify_policy("fakegrid:FakeGrid-v0", ["user_policies:lean"], **args)
    record = json.loads(result.certificate_path.read_text())["provenance"]["certify_policy"]
    assert record["env"]["provider"] == {"fakegrid": "1.0"}
    assert record["policy_names"] == ["user_policies:lean"]
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakegrid\nVersion: 1.1\n")
    with pytest.raises(PacplanError, match=r"holds a certify-policy run of other inputs "
                                           r"\(env\.provider\.fakegrid was \"1\.0\", now "
                                           r"\"1\.1\"\)"):
        certify_policy("fakegrid:FakeGrid-v0", ["user_policies:lean"], **{**args, "n": 12})


def test_key_value_has_one_rule_and_nesting_is_bounded(
        poles: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """VALUE is a JSON literal, or Python's True/False/None (it was the string "False"), else
    the string as written; a value nested beyond reason is one line from the command (a
    RecursionError traceback before) and from Python, before anything is made."""
    from pacplan.cli.certify_policy import _env_kwargs

    assert _env_kwargs(["a=False", "b=None", "c=True", "d=0.5", "e=4x4", 'f="6"', "g=[1, 2]",
                        "h=false"]) == {"a": False, "b": None, "c": True, "d": 0.5, "e": "4x4",
                                        "f": "6", "g": [1, 2], "h": False}
    deep = "[" * 5000 + "]" * 5000
    for given in (f"x={deep}", f'{{"x": {deep}}}', f"x={'[' * 40 + ']' * 40}"):
        code, _, err = cli(["certify-policy", poles, "user_policies:lean", "--env-kwargs",
                            given, "--n", "4", "--return-bounds", "0,60", "--out",
                            str(tmp_path / "out")], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "nests" in err and "refused" in err, err
    nested: list = []
    inner = nested
    for _ in range(10_000):
        inner.append([])
        inner = inner[0]
    with pytest.raises(PacplanError, match="env_kwargs nests deeper than 32 levels"):
        certify_policy(poles, ["user_policies:lean"], n=4, return_bounds=(0, 60),
                       env_kwargs={"x": nested}, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_changed_registration_is_a_changed_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Registration split from the code it registers ('reg_poles:Split-v0' registers
    'impl_poles:Impl' by name): editing the kwargs of the register call, then growing N, mixed
    rows of two environments; so did re-registering an id in Python with other kwargs."""
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "impl_poles.py").write_text(textwrap.dedent("""\
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv


        class Impl(CartPoleEnv):
            def __init__(self, length=0.5, **kwargs):
                super().__init__(**kwargs)
                self.length = length
                self.polemass_length = self.masspole * self.length
        """))
    register = ('import gymnasium as gym\n\ngym.register("Split-v0", '
                'entry_point="impl_poles:Impl", max_episode_steps=40, kwargs={{"length": {}}})\n')
    (folder / "reg_poles.py").write_text(register.format(0.5))
    monkeypatch.syspath_prepend(str(folder))
    for name in ("impl_poles", "reg_poles"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.delitem(gym.registry, "Split-v0", raising=False)
    args = {"cost": "terminated", "out": tmp_path / "split"}
    certify_policy("reg_poles:Split-v0", ["user_policies:lean"], n=5, **args)
    (folder / "reg_poles.py").write_text(register.format(2.0))
    monkeypatch.delitem(sys.modules, "reg_poles")
    monkeypatch.delitem(gym.registry, "Split-v0")
    with pytest.raises(PacplanError, match=r"other inputs \(env\.(spec|source)_sha256 was"):
        certify_policy("reg_poles:Split-v0", ["user_policies:lean"], n=8, **args)

    monkeypatch.delitem(gym.registry, "InPython-v0", raising=False)  # undone at teardown
    gym.register("InPython-v0", entry_point="impl_poles:Impl", kwargs={"length": 0.5})
    args = {"cost": "terminated", "horizon": 30, "out": tmp_path / "python"}
    certify_policy("InPython-v0", ["user_policies:lean"], n=5, **args)
    del gym.registry["InPython-v0"]
    gym.register("InPython-v0", entry_point="impl_poles:Impl", kwargs={"length": 2.0})
    with pytest.raises(PacplanError, match=r"other inputs \(env\.spec_sha256 was"):
        certify_policy("InPython-v0", ["user_policies:lean"], n=8, **args)
