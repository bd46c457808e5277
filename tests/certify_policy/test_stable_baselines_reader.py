"""The pickle-free SB3 reader acts as SB3's own `predict(obs, deterministic=True)` (SB3 is the
oracle: the models here are made by the test, not user files), for every algorithm it reads;
what it cannot read is refused in one line, and no pickle in the zip is ever executed."""

from __future__ import annotations

import base64
import io
import json
import pickle
import sys
import types
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from pacplan.certify_policy.policies import load_policy
from pacplan.certify_policy.stable_baselines import pickle_globals
from pacplan.errors import PacplanError

sb3 = pytest.importorskip("stable_baselines3")
torch = pytest.importorskip("torch")


def _observations(env: gym.Env, k: int = 100) -> np.ndarray:
    """k observations from the space, kept finite (CartPole's velocity bounds are infinite)."""
    env.observation_space.seed(7)
    obs = np.stack([env.observation_space.sample() for _ in range(k)])
    return np.clip(obs, -5.0, 5.0).astype(np.float32)


def _compare(path: Path, model: Any, env_id: str) -> None:
    env = gym.make(env_id)
    policy = load_policy(str(path), env.observation_space, env.action_space)
    obs = _observations(env)
    mine = np.stack([np.asarray(policy.act(o)) for o in obs])
    theirs = np.stack([np.asarray(model.predict(o, deterministic=True)[0]) for o in obs])
    assert mine.shape == theirs.shape and mine.dtype == theirs.dtype
    if mine.dtype.kind in "iu":
        assert np.array_equal(mine, theirs)
        assert len(np.unique(mine)) > 1  # both actions occur: the comparison is not vacuous
    else:  # one float32 network, two code paths: equal to rounding
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-5)
        assert np.ptp(theirs) > 1e-3


def test_a_trained_ppo_acts_as_sb3_predicts(ppo_cartpole: tuple[Path, Any]) -> None:
    path, model = ppo_cartpole
    _compare(path, model, "CartPole-v1")


@pytest.mark.parametrize(("algo", "env_id", "kwargs"), [
    ("PPO", "Pendulum-v1", {}),  # a Box: the mean clipped to the box, default Tanh
    ("A2C", "CartPole-v1", {"policy_kwargs": {"net_arch": [8, 8]}}),
    ("DQN", "CartPole-v1", {"policy_kwargs": {"net_arch": [12]}}),
    ("SAC", "Pendulum-v1", {"policy_kwargs": {"net_arch": [16, 16]}}),
    ("TD3", "Pendulum-v1", {"policy_kwargs": {"net_arch": [8], "activation_fn": "ELU"}}),
])
def test_every_algorithm_acts_as_sb3_predicts(tmp_path: Path, algo: str, env_id: str,
                                              kwargs: dict) -> None:
    policy_kwargs = dict(kwargs.get("policy_kwargs", {}))
    if "activation_fn" in policy_kwargs:
        policy_kwargs["activation_fn"] = getattr(torch.nn, policy_kwargs["activation_fn"])
    model = getattr(sb3, algo)("MlpPolicy", env_id, seed=3, device="cpu",
                               policy_kwargs=policy_kwargs)
    with torch.no_grad():  # untrained nets act near-constantly: spread the outputs
        for p in model.policy.parameters():
            p.mul_(4.0)
    model.save(tmp_path / "m.zip")
    _compare(tmp_path / "m.zip", model, env_id)


def _rewrite(src: Path, dst: Path, **members: bytes) -> Path:
    """A copy of an SB3 zip with some members replaced."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for name in zin.namelist():
            zout.writestr(name, members.get(name.replace(".", "_"), zin.read(name)))
    return dst


def _state_bytes(state: dict) -> bytes:
    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()


def _refused(path: Path, *words: str) -> str:
    env = gym.make("CartPole-v1")
    with pytest.raises(PacplanError) as info:
        load_policy(str(path), env.observation_space, env.action_space)
    text = str(info.value)
    assert "\n" not in text and all(w in text for w in words), text
    return text


class _Trap:
    """Unpickling it would call `_sprung` (it must never happen)."""

    def __reduce__(self) -> tuple:
        return (_sprung, ("policy.pth",))


SPRUNG: list[str] = []


def _sprung(what: str) -> None:
    SPRUNG.append(what)


def test_a_pickle_in_policy_pth_is_refused_never_run(ppo_cartpole: tuple[Path, Any],
                                                     tmp_path: Path) -> None:
    path, _ = ppo_cartpole
    bad = _rewrite(path, tmp_path / "trap.zip", policy_pth=_state_bytes({"x": _Trap()}))
    _refused(bad, "policy.pth is not a plain state dict", "weights_only")
    assert SPRUNG == []


def test_what_cannot_be_read_is_named(ppo_cartpole: tuple[Path, Any], tmp_path: Path) -> None:
    path, model = ppo_cartpole
    state = {k: v.clone() for k, v in model.policy.state_dict().items()}
    cnn = _rewrite(path, tmp_path / "cnn.zip", policy_pth=_state_bytes(
        {**state, "features_extractor.cnn.0.weight": torch.zeros(4, 1, 3, 3)}))
    _refused(cnn, "features extractor has weights")
    norm = _rewrite(path, tmp_path / "norm.zip", policy_pth=_state_bytes(
        {**state, "mlp_extractor.policy_net.1.weight": torch.ones(16)}))
    _refused(norm, "not a Linear layer")
    # a policy class SB3 itself does not ship (sb3-contrib's recurrent PPO, say)
    module = types.ModuleType("sb3_contrib_fake")
    recurrent = type("RecurrentActorCriticPolicy", (), {"__module__": module.__name__})
    module.RecurrentActorCriticPolicy = recurrent
    sys.modules[module.__name__] = module
    try:
        blob = base64.b64encode(pickle.dumps(recurrent, protocol=4)).decode()
    finally:
        del sys.modules[module.__name__]
    with zipfile.ZipFile(path) as z:
        data = json.loads(z.read("data"))
    data["policy_class"][":serialized:"] = blob
    other = _rewrite(path, tmp_path / "other.zip", data=json.dumps(data).encode())
    _refused(other, "sb3_contrib_fake.RecurrentActorCriticPolicy", "not supported")
    (tmp_path / "bare.zip").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip archive
    _refused(tmp_path / "bare.zip", "not a Stable-Baselines3 .zip", "'data'")
    (tmp_path / "vec_normalize.pkl").write_bytes(pickle.dumps({"obs_rms": 1}))
    _refused(tmp_path / "vec_normalize.pkl", "VecNormalize", "never loads")
    (tmp_path / "text.zip").write_text("not a zip")
    _refused(tmp_path / "text.zip", "not a zip archive")


def test_a_policy_for_another_environment_is_refused(ppo_cartpole: tuple[Path, Any]) -> None:
    path, _ = ppo_cartpole
    env = gym.make("Acrobot-v1")
    with pytest.raises(PacplanError, match="takes observations of size 4 but the environment "
                       "gives 6"):
        load_policy(str(path), env.observation_space, env.action_space)


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_globals_lists_the_classes_a_pickle_names(protocol: int) -> None:
    """Against the objects pickled: every class named, found by disassembly alone."""
    from collections import OrderedDict
    from fractions import Fraction

    obj = {"act": torch.nn.ReLU, "again": torch.nn.ReLU, "od": OrderedDict(a=1),
           "n": Fraction(1, 3), "t": torch.nn.Tanh}
    found = set(pickle_globals(pickle.dumps(obj, protocol=protocol)))
    names = {n for _, n in found}
    assert {("torch.nn.modules.activation", "ReLU"), ("torch.nn.modules.activation", "Tanh"),
            ("fractions", "Fraction")} <= found
    assert "OrderedDict" in names
