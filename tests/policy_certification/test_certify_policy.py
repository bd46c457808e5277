"""`pacplan certify-policy`: the stored matrix is what an independent rollout of each policy
gives, the certificate is the kl-inverse bound recomputed with scipy from that matrix, and
`verify` passes; several policies get a posterior no worse than any fixed choice; a killed
command resumes without redoing finished rows; bad input is one line, exit 2, and no folder."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import user_costs
import user_policies
from helpers import cli, klinv_oracle
from pacplan.errors import PacplanError
from pacplan.pipeline.provenance import verify_certificate
from pacplan.policy_certification import certify as certify_module
from pacplan.policy_certification import certify_policy

FIRST = 1_000_000


# ---------------------------------------------------------------- independent oracles
def _episode(env_id: str, act: Callable[[Any], Any], seed: int,
             horizon: int) -> tuple[float, bool, dict]:
    """(return, terminated, last info) of one episode of the plain environment."""
    env = gym.make(env_id, max_episode_steps=horizon)
    obs, _ = env.reset(seed=seed)
    total, terminated, info = 0.0, False, {}
    for _ in range(horizon):
        obs, r, terminated, truncated, info = env.step(act(obs))
        total += float(r)
        if terminated or truncated:
            break
    return total, bool(terminated), info


def _return_costs(env_id: str, act: Callable[[Any], Any], seeds: Sequence[int], hi: float,
                  horizon: int) -> np.ndarray:
    return np.array([(hi - _episode(env_id, act, s, horizon)[0]) / hi for s in seeds])


def _predict(model: Any) -> Callable[[Any], Any]:
    return lambda obs: model.predict(obs, deterministic=True)[0]


# ---------------------------------------------------------------- one SB3 policy, the CLI
def test_an_sb3_policy_from_the_command_line(ppo_cartpole: tuple[Path, Any], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path, model = ppo_cartpole
    out = tmp_path / "cert"
    code, stdout, err = cli(["certify-policy", "CartPole-v1", str(path), "--n", "30",
                             "--test-n", "10", "--return-bounds", "0,100", "--horizon", "100",
                             "--out", str(out), "--quiet"], capsys)
    assert code == 0, err
    cert = np.load(out / "costs" / "cert.npy")
    test = np.load(out / "costs" / "test.npy")
    want = _return_costs("CartPole-v1", _predict(model), range(FIRST, FIRST + 30), 100, 100)
    assert cert.shape == (30, 1)
    np.testing.assert_allclose(cert[:, 0], want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        test[:, 0], _return_costs("CartPole-v1", _predict(model), range(FIRST + 30, FIRST + 40),
                                  100, 100), rtol=0, atol=1e-12)
    c = verify_certificate(out / "certificate.json")
    assert (c.n, c.m, c.kl, c.p) == (30, 1, 0.0, [1.0])
    assert c.certified == pytest.approx(klinv_oracle(float(want.mean()), 0.0, 30, 0.01), abs=1e-9)
    assert c.test_cost == pytest.approx(float(test.mean()), abs=1e-12)
    assert "certified cost" in stdout
    code, stdout, err = cli(["verify", str(out / "certificate.json")], capsys)
    assert code == 0 and "OK" in stdout, err


# ---------------------------------------------------------------- several policies
POLICIES = ["user_policies:balance", "user_policies:lean", "user_policies:push_left"]


def test_several_policies_get_the_bound_optimal_posterior(tmp_path: Path) -> None:
    result = certify_policy("CartPole-v1", POLICIES, n=40, cost="return", return_bounds=[0, 60],
                            horizon=60, out=tmp_path / "three")
    matrix = np.load(tmp_path / "three" / "costs" / "cert.npy")
    fns = [user_policies.balance, user_policies.lean, user_policies.push_left]
    want = np.stack([_return_costs("CartPole-v1", f, range(FIRST, FIRST + 40), 60, 60)
                     for f in fns], axis=1)
    np.testing.assert_allclose(matrix, want, rtol=0, atol=1e-12)
    c = result.certificate
    cbar = want.mean(axis=0)
    assert len(set(np.round(cbar, 6))) == 3  # three different policies
    # no fixed posterior beats the optimum: uniform (KL 0) and each point mass (KL ln 3)
    fixed = [klinv_oracle(float(cbar.mean()), 0.0, 40, 0.01)]
    fixed += [klinv_oracle(float(v), math.log(3), 40, 0.01) for v in cbar]
    assert c.certified <= min(fixed) + 1e-9
    # nor can it beat the best policy at no KL cost
    assert c.certified >= klinv_oracle(float(cbar.min()), 0.0, 40, 0.01) - 1e-9
    assert c.p[int(np.argmin(cbar))] == max(c.p)
    verify_certificate(result.certificate_path)


# ---------------------------------------------------------------- ONNX
def _onnx(tmp_path: Path, net: Any, obs_dim: int) -> Path:
    import torch

    path = tmp_path / "net.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(net, (torch.zeros(1, obs_dim),), str(path), input_names=["obs"],
                          output_names=["out"], dynamic_axes={"obs": {0: "batch"}},
                          dynamo=False)
    return path


def test_an_onnx_policy_acts_as_the_torch_net_it_came_from(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    path = _onnx(tmp_path, net, 4)

    def torch_act(obs: np.ndarray) -> int:
        with torch.no_grad():
            return int(torch.argmax(net(torch.as_tensor(obs, dtype=torch.float32)[None])))

    result = certify_policy("CartPole-v1", [str(path)], n=15, cost="return",
                            return_bounds=[0, 80], horizon=80, out=tmp_path / "onnx")
    want = _return_costs("CartPole-v1", torch_act, range(FIRST, FIRST + 15), 80, 80)
    np.testing.assert_allclose(np.load(tmp_path / "onnx" / "costs" / "cert.npy")[:, 0], want,
                               rtol=0, atol=1e-12)
    assert result.inputs["policies"][0]["kind"] == "onnx"
    # a Box action: the net's output clipped to the box
    from pacplan.policy_certification.policies import load_policy

    box = torch.nn.Sequential(torch.nn.Linear(3, 1))
    with torch.no_grad():
        box[0].weight.fill_(3.0)
    env = gym.make("Pendulum-v1")
    policy = load_policy(str(_onnx(tmp_path, box, 3)), env.observation_space, env.action_space)
    for obs in np.random.default_rng(1).uniform(-1, 1, (20, 3)).astype(np.float32):
        with torch.no_grad():
            raw = box(torch.as_tensor(obs)[None]).numpy()[0]
        np.testing.assert_allclose(policy.act(obs), np.clip(raw, -2, 2), atol=1e-6)
    wrong = torch.nn.Sequential(torch.nn.Linear(4, 3))
    with pytest.raises(PacplanError, match="gives 3 outputs; Discrete\\(2\\) needs 2 scores"):
        load_policy(str(_onnx(tmp_path, wrong, 4)), gym.make("CartPole-v1").observation_space,
                    gym.make("CartPole-v1").action_space)


# ---------------------------------------------------------------- a success cost
def test_a_success_cost_the_user_names(tmp_path: Path) -> None:
    lander = user_costs.register_lander()
    good = certify_policy(lander, ["user_policies:land_when_told"], n=25, cost="success",
                          success_key="landed", success_needs_terminated=True,
                          out=tmp_path / "good")
    assert good.certificate.emp_cost == 0.0
    assert good.certificate.certified == pytest.approx(klinv_oracle(0.0, 0.0, 25, 0.01), abs=1e-9)
    once = certify_policy(lander, ["user_policies:fire_at_once"], n=25, cost="success",
                          success_key="landed", out=tmp_path / "once")
    costs = np.load(tmp_path / "once" / "costs" / "cert.npy")[:, 0]
    landed = [_episode(lander, user_policies.fire_at_once, s, 10)[2]["landed"]
              for s in range(FIRST, FIRST + 25)]
    assert costs.tolist() == [0.0 if ok else 1.0 for ok in landed]
    assert 0 < once.certificate.emp_cost < 1


# ---------------------------------------------------------------- resuming
def test_a_killed_command_resumes_without_redoing_rows(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    real = certify_module.cost_rows
    calls: list[tuple[int, int]] = []

    def counting(world: Any, env: Any, policies: Any, seeds: range, done: Any,
                 *args: Any) -> np.ndarray:
        if len(calls) == 2 and stop_after_two:
            raise KeyboardInterrupt
        calls.append((seeds.start, seeds.stop))
        return real(world, env, policies, seeds, done, *args)

    monkeypatch.setattr(certify_module, "cost_rows", counting)
    args = {"n": 35, "cost": "terminated", "horizon": 50}
    stop_after_two = True
    with pytest.raises(KeyboardInterrupt):
        certify_policy("CartPole-v1", ["user_policies:lean"], out=tmp_path / "k", **args)
    assert (tmp_path / "k" / "certify-policy.json").is_file()  # a kill keeps the folder
    assert calls == [(FIRST, FIRST + 10), (FIRST + 10, FIRST + 20)]
    stop_after_two = False
    calls.clear()
    resumed = certify_policy("CartPole-v1", ["user_policies:lean"], out=tmp_path / "k", **args)
    assert calls == [(FIRST + 20, FIRST + 30), (FIRST + 30, FIRST + 35)]
    calls.clear()
    fresh = certify_policy("CartPole-v1", ["user_policies:lean"], out=tmp_path / "f", **args)
    assert np.array_equal(np.load(tmp_path / "k" / "costs" / "cert.npy"),
                          np.load(tmp_path / "f" / "costs" / "cert.npy"))
    assert resumed.certificate.certified == fresh.certificate.certified
    calls.clear()  # a new δ on a finished folder: no rollout at all
    again = certify_policy("CartPole-v1", ["user_policies:lean"], out=tmp_path / "k",
                           delta=0.05, **args)
    assert calls == [] and again.certificate.delta == 0.05
    assert again.certificate.certified < resumed.certificate.certified
    with pytest.raises(PacplanError, match=r"holds a certify-policy run of other inputs "
                       r"\(policies was"):
        certify_policy("CartPole-v1", ["user_policies:balance"], out=tmp_path / "k", **args)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(("args", "words"), [
    (["CartPole-v1", "NOTAPOLICY", "--cost", "terminated"], ["is not a Stable-Baselines3 .zip"]),
    (["NoSuchEnv-v0", "user_policies:balance"], ["ENV_ID 'NoSuchEnv-v0'"]),
    (["CartPole-v1", "user_policies:balance", "--cost", "user_costs:too_big", "--first-seed",
      "0"], ["user_costs:too_big returned 1.5 on seed 3"]),
    (["CartPole-v1", "user_policies:balance", "--cost", "user_costs:raises"],
     ["user_costs:raises raised KeyError", f"seed {FIRST}"]),
    (["CartPole-v1", "user_policies:balance", "--cost", "terminated", "--train-seeds",
      "0:2000000"], ["overlap the training seeds [0, 2000000)", "--first-seed ≥ 2000000"]),
    (["CartPole-v1", "user_policies:broken", "--cost", "terminated"],
     ["policy user_policies:broken failed on seed", "sensor offline"]),
    (["CartPole-v1", "user_policies:balance", "user_policies:balance", "--cost", "terminated"],
     ["are the same policy"]),
    (["CartPole-v1", "user_policies:balance", "--cost", "terminated", "--train-seeds", "5"],
     ["--train-seeds must be A:B"]),
])
def test_bad_input_is_one_line_exit_2_and_no_folder(tmp_path: Path, args: list[str],
                                                    words: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    text = tmp_path / "NOTAPOLICY"
    text.write_text("hello")
    args = [str(text) if a == "NOTAPOLICY" else a for a in args]
    out = tmp_path / "out"
    code, _, err = cli(["certify-policy", *args, "--n", "5", "--out", str(out), "--quiet"],
                       capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


def test_outputs_are_guarded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("x")
    with pytest.raises(PacplanError, match="exists and is not a certify-policy directory"):
        certify_policy("CartPole-v1", ["user_policies:lean"], n=3, cost="terminated",
                       out=foreign)
    empty = tmp_path / "empty"  # a folder the user made: left as it was found
    empty.mkdir()
    with pytest.raises(PacplanError, match="raised KeyError"):
        certify_policy("CartPole-v1", ["user_policies:lean"], n=3, cost="user_costs:raises",
                       out=empty)
    assert empty.is_dir() and list(empty.iterdir()) == []
    done = tmp_path / "done"
    certify_policy("CartPole-v1", ["user_policies:lean"], n=3, cost="terminated", out=done)
    code, _, err = cli(["certify-matrix", str(done / "costs" / "cert.npy"), "--out",
                        str(done / "mine.json")], capsys)
    assert code == 2 and "is inside the certify-policy directory" in err
