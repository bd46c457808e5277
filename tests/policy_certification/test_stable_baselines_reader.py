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

from pacplan.errors import PacplanError
from pacplan.policy_certification.policies import load_policy
from pacplan.policy_certification.stable_baselines_zip import pickle_globals

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
    assert np.array_equal(mine, theirs)  # to the bit: the same torch ops on the same floats
    if mine.dtype.kind in "iu":
        assert len(np.unique(mine)) > 1  # both actions occur: the comparison is not vacuous
    else:
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


# ---------------------------------------------------------------- only what SB3 itself builds
def _model(tmp_path: Path, algo: str = "PPO", env_id: str = "CartPole-v1", name: str = "m.zip",
           policy: Any = "MlpPolicy", **policy_kwargs: Any) -> tuple[Path, Any]:
    """(path, model) of an untrained SB3 model saved by SB3."""
    model = getattr(sb3, algo)(policy, env_id, seed=3, device="cpu",
                               policy_kwargs=policy_kwargs)
    model.save(tmp_path / name)
    return tmp_path / name, model


def _data(path: Path) -> dict:
    with zipfile.ZipFile(path) as z:
        return json.loads(z.read("data"))


@pytest.fixture
def usermod() -> Any:
    """`usermod`, a module of the user's, importable while the test runs."""
    module = types.ModuleType("usermod")
    sys.modules["usermod"] = module
    yield module
    del sys.modules["usermod"]


def _user_class(module: types.ModuleType, name: str, base: type, forward: Any) -> type:
    cls = type(name, (base,), {"forward": forward, "__module__": module.__name__})
    setattr(module, name, cls)
    return cls


def test_a_user_activation_is_refused_whatever_its_name(tmp_path: Path, usermod: Any) -> None:
    """SB3 runs the class it unpickles: a user's `Tanh`, a user's subclass of torch's ReLU
    (pickled by value), a functools.partial of torch's LeakyReLU. None of them is torch's."""
    import functools

    import cloudpickle

    tanh = _user_class(usermod, "Tanh", torch.nn.Module, lambda self, x: torch.tanh(2.0 * x))
    path, _ = _model(tmp_path, "PPO", name="ref.zip", activation_fn=tanh)
    _refused(path, "activation usermod.Tanh (module usermod)", "torch's own")
    relu = _user_class(usermod, "ReLU", torch.nn.ReLU, lambda self, x: -torch.relu(x))
    cloudpickle.register_pickle_by_value(usermod)
    try:
        by_value, _ = _model(tmp_path, "DQN", name="value.zip", activation_fn=relu)
    finally:
        cloudpickle.unregister_pickle_by_value(usermod)
    _refused(by_value, "activation usermod.ReLU (module usermod)")
    leaky = functools.partial(torch.nn.LeakyReLU, negative_slope=0.5)
    partial, _ = _model(tmp_path, "PPO", name="partial.zip", activation_fn=leaky)
    _refused(partial, "activation_fn \"functools.partial(<class 'torch.nn.modules.activation.",
             "is not a class")
    # the pickle is what SB3 loads: read alone (its text gone or lying), it is refused too
    for zip_path, words in ((path, "class usermod.Tanh"),
                            (by_value, "class cloudpickle.cloudpickle._make_skeleton_class"),
                            (partial, "class functools.partial")):
        for text in (None, "<class 'torch.nn.modules.activation.ReLU'>"):
            data = _data(zip_path)
            data["policy_kwargs"].pop("activation_fn")
            if text is not None:
                data["policy_kwargs"]["activation_fn"] = text
            bad = _rewrite(zip_path, tmp_path / "bad.zip", data=json.dumps(data).encode())
            _refused(bad, f"policy_kwargs names {words}", "which SB3 would run")


def test_the_activation_text_cannot_stand_in_for_the_pickle(ppo_cartpole: tuple[Path, Any],
                                                           tmp_path: Path) -> None:
    path, _ = ppo_cartpole  # its pickle names torch's ReLU
    for text, words in (
            ("<class 'evil.torch.nn.modules.activation.ReLU'>",
             ("activation evil.torch.nn.modules.activation.ReLU", "(module evil.torch.nn")),
            ("<class 'torch.nn.modules.activation.Tanh'>",
             ("pickle names torch.nn.modules.activation.ReLU but its text says", "Tanh")),
            ("ReLU", ("activation_fn 'ReLU' is not a class",))):
        data = _data(path)
        data["policy_kwargs"]["activation_fn"] = text
        _refused(_rewrite(path, tmp_path / "text.zip", data=json.dumps(data).encode()), *words)
    data = _data(path)  # a text without the pickle SB3 would load
    data["policy_kwargs"] = {k: v for k, v in data["policy_kwargs"].items()
                             if not k.startswith(":")}
    _refused(_rewrite(path, tmp_path / "plain.zip", data=json.dumps(data).encode()),
             "pickle names no activation but its text says")


def test_a_user_policy_class_pickled_by_value_is_refused(tmp_path: Path, usermod: Any) -> None:
    """A subclass of SB3's ActorCriticPolicy can act otherwise; its pickle names SB3's class
    as its base, beside cloudpickle's class-building functions."""
    import cloudpickle
    from stable_baselines3.common.policies import ActorCriticPolicy

    sub = type("ActorCriticPolicy", (ActorCriticPolicy,), {"__module__": "usermod"})
    usermod.ActorCriticPolicy = sub
    cloudpickle.register_pickle_by_value(usermod)
    try:
        path, _ = _model(tmp_path, "PPO", policy=sub)
    finally:
        cloudpickle.unregister_pickle_by_value(usermod)
    _refused(path, "cloudpickle.cloudpickle._make_skeleton_class", "is not supported")


@pytest.mark.parametrize(("algo", "env_id", "prefix"), [
    ("PPO", "CartPole-v1", "mlp_extractor.policy_net"),
    ("DQN", "CartPole-v1", "q_net.q_net"),
    ("SAC", "Pendulum-v1", "actor.latent_pi"),
    ("TD3", "Pendulum-v1", "actor.mu"),
])
def test_a_layer_numbering_sb3_never_makes_is_refused(tmp_path: Path, algo: str, env_id: str,
                                                      prefix: str) -> None:
    """SB3's MLPs are Sequential(Linear, act, Linear, act, …): Linear at 0, 2, 4, …"""
    path, model = _model(tmp_path, algo, env_id, net_arch=[8, 8])
    state = model.policy.state_dict()
    found = sorted({int(k.split(".")[-2]) for k in state if k.startswith(prefix + ".")})
    assert found == list(range(0, 2 * len(found), 2))  # what SB3 made: read as before
    last = found[-1]
    for moved in (last + 2, last - 1):  # a gap; two Linear layers abutting
        want = str([*found[:-1], moved])
        renamed = {k.replace(f"{prefix}.{last}.", f"{prefix}.{moved}."): v
                   for k, v in state.items()}
        bad = _rewrite(path, tmp_path / "bad.zip", policy_pth=_state_bytes(renamed))
        env = gym.make(env_id)
        with pytest.raises(PacplanError) as info:
            load_policy(str(bad), env.observation_space, env.action_space)
        text = str(info.value)
        assert "\n" not in text and f"{prefix} has Linear layers at {want}" in text, text


def test_layers_that_do_not_chain_are_refused(tmp_path: Path) -> None:
    path, model = _model(tmp_path, "PPO", net_arch=[8, 8])
    state = model.policy.state_dict()
    for key, shape, words in (
            ("mlp_extractor.policy_net.2.weight", (8, 5),
             "layer mlp_extractor.policy_net.2 takes 5 inputs but mlp_extractor.policy_net.0 "
             "gives 8"),
            ("action_net.weight", (2, 7),
             "layer action_net takes 7 inputs but mlp_extractor.policy_net.2 gives 8")):
        bad = _rewrite(path, tmp_path / "bad.zip",
                       policy_pth=_state_bytes({**state, key: torch.zeros(shape)}))
        _refused(bad, words, "not a network SB3 builds")


def test_non_finite_weights_and_outputs_are_refused(tmp_path: Path) -> None:
    path, model = _model(tmp_path, "PPO", net_arch=[])  # action_net on the observation
    state = model.policy.state_dict()
    nan = state["action_net.weight"].clone()
    nan[1, 2] = float("nan")
    bad = _rewrite(path, tmp_path / "nan.zip",
                   policy_pth=_state_bytes({**state, "action_net.weight": nan}))
    _refused(bad, "action_net.weight holds NaN or infinite values")
    huge = torch.full_like(state["action_net.weight"], 3e38)  # finite; its sums are not
    big = _rewrite(path, tmp_path / "big.zip",
                   policy_pth=_state_bytes({**state, "action_net.weight": huge}))
    env = gym.make("CartPole-v1")
    policy = load_policy(str(big), env.observation_space, env.action_space)
    with pytest.raises(PacplanError) as info:
        policy.act(np.ones(4, np.float32))
    text = str(info.value)
    assert "\n" not in text and "big.zip: the network gave a non-finite output (inf)" in text
    assert "for observation [1. 1. 1. 1.]" in text, text


def test_a_discrete_action_is_sb3s_categorical_mode(tmp_path: Path) -> None:
    """SB3's deterministic action is the argmax of Categorical(logits).probs, not of the
    logits: logits one float apart can have equal probabilities, and then SB3 takes the
    first."""
    path, model = _model(tmp_path, "PPO", net_arch=[])
    a = np.float32(-0.010418631)
    logits = torch.tensor([a, np.nextafter(a, np.float32(1))])
    with torch.no_grad():
        model.policy.action_net.weight.zero_()
        model.policy.action_net.bias.copy_(logits)
    model.save(path)
    env = gym.make("CartPole-v1")
    policy = load_policy(str(path), env.observation_space, env.action_space)
    obs = _observations(env, 10)
    assert [int(model.predict(o, deterministic=True)[0]) for o in obs] == [0] * 10
    assert [int(policy.act(o)) for o in obs] == [0] * 10
