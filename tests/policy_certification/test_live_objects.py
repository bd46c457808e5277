"""`pacplan.certify_policy` takes what a Python user has in hand (issue 51): functions, torch
modules, SB3 models (with VecNormalize), onnxruntime sessions, cost functions, environment
factories and instances. Each is certified as its path or 'module:callable' twin would be, is
identified as far as it can be, and what cannot be identified is said and never resumed."""

from __future__ import annotations

import inspect
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import pacplan
import user_policies
from pacplan.errors import PacplanError
from pacplan.policy_certification import certify_policy

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

FIRST = 1_000_000
ARGS = {"n": 8, "cost": "terminated", "horizon": 60}


def _costs(result: Any) -> np.ndarray:
    return np.load(result.certificate.cert_matrix.path)


def _record(result: Any) -> dict:
    cert = json.loads(result.certificate_path.read_text())
    return cert["provenance"]["certify_policy"]


def _terminated(act: Any, seeds: range, horizon: int = 60) -> list[float]:
    """The oracle: whether each raw episode terminated within the horizon."""
    out = []
    for seed in seeds:
        env = gym.make("CartPole-v1", max_episode_steps=horizon)
        obs, _ = env.reset(seed=seed)
        done = False
        for _ in range(horizon):
            obs, _, terminated, truncated, _ = env.step(act(obs))
            if terminated or truncated:
                done = bool(terminated)
                break
        out.append(float(done))
    return out


def test_the_front_door_has_a_real_signature() -> None:
    params = inspect.signature(pacplan.certify_policy).parameters
    assert list(params)[:3] == ["env_id", "policies", "n"] and "env_kwargs" in params
    assert "torch module" in (inspect.getdoc(pacplan.certify_policy) or "")


def test_a_function_is_its_module_callable_twin(tmp_path: Path) -> None:
    by_name = certify_policy("CartPole-v1", ["user_policies:lean"], out=tmp_path / "o", **ARGS)
    resumed = certify_policy("CartPole-v1", [user_policies.lean], out=tmp_path / "o", **ARGS)
    assert resumed.inputs == by_name.inputs  # the same identity: the folder resumes
    assert np.array_equal(_costs(resumed), _costs(by_name))


def test_what_cannot_be_identified_is_said_and_never_resumed(tmp_path: Path) -> None:
    logged: list[str] = []
    out = tmp_path / "o"
    result = certify_policy("CartPole-v1", [lambda obs: int(obs[2] > 0)], out=out,
                            log=logged.append, **ARGS)
    assert _record(result)["policies"][0]["source"] == "unidentified"
    assert np.array_equal(_costs(result)[:, 0],
                          _terminated(user_policies.lean, range(FIRST, FIRST + 8)))
    assert any("policy #0: Python objects whose state is in no file" in m for m in logged)
    with pytest.raises(PacplanError, match="policy #0 cannot be identified across runs"):
        certify_policy("CartPole-v1", [lambda obs: int(obs[2] > 0)], out=out, **ARGS)


def test_python_warns_of_an_unidentified_input_as_the_command_says_it(tmp_path: Path) -> None:
    """Without a log, Python gets a warning of its own category (filterable), and n defaults
    to the command's 500 seeds."""
    from pacplan import UnidentifiedInputWarning
    from pacplan.policy_certification.seeds import DEFAULT_N

    args = {k: v for k, v in ARGS.items() if k != "n"}
    with pytest.warns(UnidentifiedInputWarning, match="policy #0: Python objects whose state"):
        result = certify_policy("CartPole-v1", [lambda obs: int(obs[2] > 0)],
                                out=tmp_path / "o", **args)
    assert result.certificate.n == DEFAULT_N == 500


def test_a_torch_module_acts_as_its_onnx_convention_says(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))

    def act(obs: np.ndarray) -> int:
        with torch.no_grad():
            return int(torch.argmax(net(torch.as_tensor(obs, dtype=torch.float32)[None])))

    out = tmp_path / "o"
    result = certify_policy("CartPole-v1", [net], out=out, **ARGS)
    assert _costs(result)[:, 0].tolist() == _terminated(act, range(FIRST, FIRST + 8))
    assert _record(result)["policies"][0]["source"] == "object"
    again = certify_policy("CartPole-v1", [net], out=out, **ARGS)  # stable identity: resumes
    assert again.inputs == result.inputs
    with torch.no_grad():
        net[0].weight[0, 0] += 1.0
    with pytest.raises(PacplanError, match="holds a certify-policy run of other inputs "
                                           r"\(policies was"):
        certify_policy("CartPole-v1", [net], out=out, **ARGS)


def test_an_sb3_model_is_its_zip(ppo_cartpole: tuple[Path, Any], tmp_path: Path) -> None:
    path, model = ppo_cartpole
    from_zip = certify_policy("CartPole-v1", [str(path)], out=tmp_path / "zip", **ARGS)
    from_model = certify_policy("CartPole-v1", [model], out=tmp_path / "model", **ARGS)
    assert np.array_equal(_costs(from_model), _costs(from_zip))
    assert _record(from_model)["policies"][0]["kind"] == "sb3 model"


def test_an_sb3_model_with_vecnormalize_sees_normalized_observations(tmp_path: Path) -> None:
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    venv = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]), norm_reward=False)
    model = sb3.PPO("MlpPolicy", venv, n_steps=64, batch_size=32, n_epochs=1, seed=0,
                    device="cpu", policy_kwargs={"net_arch": [8]})
    model.learn(128)
    norm = model.get_vec_normalize_env()
    assert norm is not None and not np.allclose(norm.obs_rms.var, 1.0)

    def act(obs: np.ndarray) -> Any:
        return model.predict(norm.normalize_obs(obs), deterministic=True)[0]

    result = certify_policy("CartPole-v1", [model], out=tmp_path / "o", **ARGS)
    assert _costs(result)[:, 0].tolist() == _terminated(act, range(FIRST, FIRST + 8))
    assert _record(result)["policies"][0]["kind"] == "sb3 model with VecNormalize"


def test_an_onnxruntime_session_is_its_file(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    from test_user_code_boundary import _linear_onnx

    model = _linear_onnx(tmp_path / "m.onnx", 4, 2)
    by_path = certify_policy("CartPole-v1", [str(model)], out=tmp_path / "a", **ARGS)
    by_session = certify_policy("CartPole-v1", [ort.InferenceSession(str(model))],
                                out=tmp_path / "a", **ARGS)
    assert by_session.inputs == by_path.inputs
    with pytest.raises(PacplanError, match="made from bytes has no file"):
        certify_policy("CartPole-v1", [ort.InferenceSession(model.read_bytes())],
                       out=tmp_path / "b", **ARGS)


def test_a_cost_function_and_an_environment_factory(tmp_path: Path) -> None:
    args = {"n": 8, "horizon": 60}
    by_name = certify_policy("CartPole-v1", ["user_policies:lean"],
                             cost="user_policies:short_episode", out=tmp_path / "a", **args)
    by_object = certify_policy(user_policies.make_cartpole, ["user_policies:lean"],
                               cost=user_policies.short_episode, out=tmp_path / "b", **args)
    assert np.array_equal(_costs(by_object), _costs(by_name))
    record = _record(by_object)
    assert record["cost"]["cost"] == "python:user_policies.short_episode"
    assert "source" not in record["cost"] and "source" not in record["env"]
    instance = certify_policy(gym.make("CartPole-v1"), ["user_policies:lean"],
                              cost=lambda e: float(e.terminated), out=tmp_path / "c", **args)
    record = _record(instance)
    assert record["env"]["source"] == "unidentified" and record["cost"]["source"] == \
        "unidentified"


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"policies": [42]}, "policy #0 is a int: give a path"),
    ({"policies": [user_policies.lean], "cost": 3}, "cost must be one of return"),
    ({"policies": [user_policies.lean], "env_id": lambda: 7},
     "returned a int, not a gymnasium.Env"),
    ({"policies": [lambda obs: np.array([0.5, 0.5])]}, "is not an integer"),
    ({"policies": [user_policies.lean], "env_id": user_policies.make_cartpole,
      "env_kwargs": {"a": 1}}, "an environment given as an object or factory makes its own"),
])
def test_objects_that_do_not_fit_are_one_line(tmp_path: Path, kwargs: dict,
                                              words: str) -> None:
    call = {"env_id": "CartPole-v1", "cost": "terminated", **kwargs}
    with pytest.raises(PacplanError) as info:
        certify_policy(call.pop("env_id"), call.pop("policies"), n=3, out=tmp_path / "o",
                       **call)
    assert words in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "o").exists()


def test_vecnormalize_statistics_from_an_npz_without_a_pickle(tmp_path: Path) -> None:
    """A zip trained under VecNormalize, its statistics converted to an .npz as the docs say:
    the command line's rollouts are SB3's on SB3's own normalized observations, in one
    process or two."""
    sb3 = pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    venv = VecNormalize(DummyVecEnv([lambda: gym.make("CartPole-v1")]), norm_reward=False)
    model = sb3.PPO("MlpPolicy", venv, n_steps=64, batch_size=32, n_epochs=1, seed=1,
                    device="cpu", policy_kwargs={"net_arch": [8]})
    model.learn(128)
    model.save(tmp_path / "ppo.zip")
    venv.save(str(tmp_path / "vecnormalize.pkl"))
    # the conversion, in the user's own trusted environment (docs/certify-policy.md)
    vn = VecNormalize.load(str(tmp_path / "vecnormalize.pkl"),
                           DummyVecEnv([lambda: gym.make("CartPole-v1")]))
    np.savez(tmp_path / "vecnormalize.npz", mean=vn.obs_rms.mean, var=vn.obs_rms.var,
             clip_obs=vn.clip_obs, epsilon=vn.epsilon)
    assert not np.allclose(vn.obs_rms.var, 1.0)

    def act(obs: np.ndarray) -> Any:
        return model.predict(vn.normalize_obs(obs), deterministic=True)[0]

    want = _terminated(act, range(FIRST, FIRST + 8))
    for workers in (1, 2):
        result = certify_policy("CartPole-v1", [str(tmp_path / "ppo.zip")],
                                obs_normalization=tmp_path / "vecnormalize.npz",
                                workers=workers, out=tmp_path / f"w{workers}", **ARGS)
        assert _costs(result)[:, 0].tolist() == want
        assert _record(result)["obs_normalization"]["file"] == "vecnormalize.npz"
    bad = tmp_path / "bad.npz"
    np.savez(bad, mean=np.zeros(3), var=np.ones(3), clip_obs=10.0, epsilon=1e-8)
    with pytest.raises(PacplanError, match=r"mean \(3,\) and var \(3,\) must have the "
                                           r"observations' shape \(4,\)"):
        certify_policy("CartPole-v1", [str(tmp_path / "ppo.zip")], obs_normalization=bad,
                       out=tmp_path / "bad", **ARGS)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, mean=np.array([object()]), var=np.ones(4), clip_obs=10.0, epsilon=1e-8)
    with pytest.raises(PacplanError, match=r"array .mean.: holds Python objects .*refused"):
        certify_policy("CartPole-v1", [str(tmp_path / "ppo.zip")], obs_normalization=pickled,
                       out=tmp_path / "pickled", **ARGS)


def test_a_torch_module_attribute_is_part_of_its_identity(tmp_path: Path) -> None:
    """A scale set on a module changes its actions without touching its state dict; the
    folder resumed with the new rows mixed in. An attribute with no value to hash makes the
    module unidentified (never resumed)."""
    torch = pytest.importorskip("torch")
    from scaled_net import ScaledNet

    torch.manual_seed(0)
    net = ScaledNet()
    out = tmp_path / "o"
    first = certify_policy("CartPole-v1", [net], out=out, **ARGS)
    assert _record(first)["policies"][0]["source"] == "object"
    net.scale = -1.0
    with pytest.raises(PacplanError, match=r"other inputs \(policies was"):
        certify_policy("CartPole-v1", [net], out=out, **ARGS)
    net.scale, net.tag = 1.0, object()
    with pytest.warns(pacplan.UnidentifiedInputWarning):
        other = certify_policy("CartPole-v1", [net], out=tmp_path / "p", **ARGS)
    assert _record(other)["policies"][0]["source"] == "unidentified"


def test_a_global_a_function_reads_is_part_of_its_identity(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A script that sets a module's global after importing it changes what a top-level
    function does; the folder resumed with the new rows mixed in."""
    out = tmp_path / "o"
    first = certify_policy("CartPole-v1", [user_policies.thresholded], out=out, **ARGS)
    assert _record(first)["policies"][0].get("source", "file") == "file"
    again = certify_policy("CartPole-v1", [user_policies.thresholded], out=out, **ARGS)
    assert again.inputs == first.inputs  # unchanged: it resumes
    monkeypatch.setattr(user_policies, "THRESHOLD", 0.05)
    with pytest.raises(PacplanError, match=r"other inputs \(policies was"):
        certify_policy("CartPole-v1", [user_policies.thresholded], out=out, **ARGS)
    monkeypatch.setattr(user_policies, "THRESHOLD", Fraction(0))  # compares, has no hash
    with pytest.warns(pacplan.UnidentifiedInputWarning):
        certify_policy("CartPole-v1", [user_policies.thresholded], out=tmp_path / "p",
                       **ARGS)


def test_a_session_whose_file_was_replaced_is_refused(tmp_path: Path) -> None:
    """The rollouts use the file's bytes; a session made before the file was replaced computes
    something else, and was certified as the new file (its rows joined the old ones)."""
    ort = pytest.importorskip("onnxruntime")
    from helpers import onnx_linear

    onnx_linear(tmp_path / "m.onnx", 4, 2)
    session = ort.InferenceSession(str(tmp_path / "m.onnx"))
    assert _record(certify_policy("CartPole-v1", [session], out=tmp_path / "a", **ARGS))
    onnx_linear(tmp_path / "m.onnx", 4, 2, scale=-1.0)
    with pytest.raises(PacplanError, match=r"policy #0: the onnxruntime session computes "
                                           r"other outputs than its file .*m\.onnx"):
        certify_policy("CartPole-v1", [session], out=tmp_path / "a", **ARGS)


def test_a_function_reading_a_global_sb3_model_is_identified_by_its_weights(
        ppo_cartpole: tuple[Path, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`model = PPO.load(...)` at import and `act` calling it: identified by the model's
    weights (a changed model is a changed policy), not made unidentified."""
    path, model = ppo_cartpole
    monkeypatch.setattr(user_policies, "MODEL", model, raising=False)
    first = certify_policy("CartPole-v1", [user_policies.with_model], out=tmp_path / "o", **ARGS)
    assert _record(first)["policies"][0].get("source", "file") == "file"
    again = certify_policy("CartPole-v1", [user_policies.with_model], out=tmp_path / "o",
                           **ARGS)
    assert again.inputs == first.inputs
    torch = pytest.importorskip("torch")
    changed = type(model).load(path, device="cpu")
    with torch.no_grad():
        next(changed.policy.parameters()).add_(1.0)
    monkeypatch.setattr(user_policies, "MODEL", changed)
    with pytest.raises(PacplanError, match=r"other inputs \(policies was"):
        certify_policy("CartPole-v1", [user_policies.with_model], out=tmp_path / "o", **ARGS)
