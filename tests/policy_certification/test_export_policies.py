"""From certificate to robot: `pacplan export` of a certify-policy folder writes a planner that
`pacplan verify` re-checks, the torch-free runtime acts with it exactly as the certified
policy, and `pacplan monitor` watches its certificate."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import venv
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import user_policies
from helpers import cli, onnx_linear
from pacplan.errors import PacplanError
from pacplan.export import export_planner, verify_planner
from pacplan.io.files import load_npy, sha256_file
from pacplan.policy_certification import certify_policy
from pacplan.policy_certification.kinds import PolicyKind
from pacplan.policy_certification.stable_baselines import SB3Policy
from pacplan.runtime import Planner, PlannerError

ROOT = Path(__file__).resolve().parents[2]
H = 50  # CartPole's horizon here; cost = (H − return) / H


def _flat_costs(act: Any, seeds: range) -> np.ndarray:
    """Each seed's episode as certify-policy rolls it out, costed by the return rule."""
    env = gym.make("CartPole-v1", max_episode_steps=H)
    costs = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        env.action_space.seed(seed)
        total = 0.0
        for _ in range(H):
            obs, reward, terminated, truncated, _ = env.step(act(obs))
            total += float(reward)
            if terminated or truncated:
                break
        costs.append((H - total) / H)
    return np.array(costs)


@pytest.fixture(scope="module")
def certified(ppo_cartpole: tuple[Path, Any], tmp_path_factory: pytest.TempPathFactory
              ) -> Path:
    folder = tmp_path_factory.mktemp("certified") / "cartpole"
    certify_policy("CartPole-v1", [str(ppo_cartpole[0])], n=100, cost="return",
                   return_bounds=[0, H], horizon=H, out=folder)
    return folder


@pytest.fixture(scope="module")
def planner(certified: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_planner(certified, tmp_path_factory.mktemp("planner") / "cartpole")


def _bare_python(tmp_path: Path) -> Path:
    """A fresh venv that sees numpy, onnxruntime and runtime/src only: no torch, no gymnasium,
    no pacplan (each linked in from this venv, offline)."""
    root = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()"
                                         "['purelib'])"], capture_output=True, text=True,
                          check=True).stdout.strip()
    deps = tmp_path / "deps"
    deps.mkdir()
    here = Path(np.__file__).parents[1]
    for name in ("numpy", "numpy.libs", "onnxruntime"):
        if (here / name).exists():
            (deps / name).symlink_to(here / name)
    (Path(site) / "robot.pth").write_text(f"{deps}\n{ROOT / 'runtime' / 'src'}\n")
    return python


BARE_SCRIPT = """
import importlib.util, sys
import numpy as np
from pacplan_runtime import Planner
absent = [m for m in ("torch", "gymnasium", "pacplan", "stable_baselines3", "onnx")
          if importlib.util.find_spec(m)]
assert not absent, absent
planner = Planner.load(sys.argv[1])
episode = planner.episode(np.random.default_rng(0))
obs = np.load(sys.argv[2])
np.save(sys.argv[3], np.array([episode.act(o).action for o in obs]))
print(planner.world, planner.certified_cost, planner.environment["id"])
"""


def test_sb3_zip_to_certificate_to_robot_to_monitor(ppo_cartpole: tuple[Path, Any],
                                                    tmp_path: Path, capsys) -> None:
    """The whole chain: a PPO zip → certify-policy → export → the runtime in a venv without
    torch (the reader's and SB3's actions on 5,000 observations) → monitor (no alarm on the
    certified policy's costs, an alarm on a broken policy's)."""
    zip_path, model = ppo_cartpole
    folder, out = tmp_path / "certified", tmp_path / "planner"
    args = ["certify-policy", "CartPole-v1", str(zip_path), "--cost", "return",
            "--return-bounds", f"0,{H}", "--horizon", str(H), "--n", "100", "--out", str(folder)]
    assert cli(args, capsys)[0] == 0
    code, text, _ = cli(["export", str(folder), "--out", str(out)], capsys)
    assert code == 0 and "Exported" in text, text
    code, text, _ = cli(["verify", str(out)], capsys)
    assert code == 0 and "OK planner" in text, text

    env = gym.make("CartPole-v1")
    reader = SB3Policy(str(zip_path), zip_path.read_bytes(), env.observation_space,
                       env.action_space)
    obs = np.random.default_rng(7).normal(0.0, 2.0, (5000, 4)).astype(np.float32)
    np.save(tmp_path / "obs.npy", obs)
    python = _bare_python(tmp_path)
    user_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    run = subprocess.run([python, "-c", BARE_SCRIPT, str(out), str(tmp_path / "obs.npy"),
                          str(tmp_path / "actions.npy")], capture_output=True, text=True,
                         cwd=tmp_path, env=user_env, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split()[0] == "policies" and "CartPole-v1" in run.stdout
    robot = np.load(tmp_path / "actions.npy")
    assert robot.tolist() == [int(reader.act(o)) for o in obs]
    assert robot.tolist() == model.predict(obs, deterministic=True)[0].tolist()

    # flown through the runtime here, on the certification seeds: the certified costs
    ep = Planner.load(out).episode(np.random.default_rng(0))
    first = 1_000_000
    stored = load_npy(folder / "costs" / "cert.npy")[:, 0]
    flown = _flat_costs(lambda o: ep.act(np.ravel(o)).action, range(first, first + 100))
    assert np.array_equal(flown, stored)  # the same episodes, the same costs, bit for bit

    fresh = range(3_000_000, 3_000_300)
    good = _flat_costs(lambda o: ep.act(np.ravel(o)).action, fresh)
    broken = _flat_costs(user_policies.push_left, fresh)
    for name, costs in (("good", good), ("broken", broken)):
        (tmp_path / f"{name}.csv").write_text("\n".join(map(repr, costs.tolist())) + "\n")
    code, text, _ = cli(["monitor", str(out), str(tmp_path / "good.csv")], capsys)
    assert code == 0 and "holding: no alarm in 300 episodes" in text, text
    code, text, _ = cli(["monitor", str(out), str(tmp_path / "broken.csv")], capsys)
    assert code == 1 and "ALARM at episode" in text, text


SB3_CASES = [("PPO", "CartPole-v1", None), ("A2C", "CartPole-v1", None),
             ("DQN", "CartPole-v1", None), ("PPO", "Pendulum-v1", None),
             ("SAC", "Pendulum-v1", None), ("TD3", "Pendulum-v1", None),
             *(("PPO", "Pendulum-v1", act) for act in (
                 "ELU", "LeakyReLU", "GELU", "SiLU", "Sigmoid", "Softplus", "Mish", "SELU",
                 "CELU", "Hardtanh", "ReLU6", "Identity"))]


@pytest.mark.parametrize(("algo", "env_id", "activation"), SB3_CASES)
def test_sb3_onnx_acts_as_the_reader(algo: str, env_id: str, activation: str | None,
                                      tmp_path: Path) -> None:
    """The converted graph, run under the .onnx policy convention, gives the reader's action
    on 2,000 observations: the same index for a Discrete space; for a Box the same float32
    action up to onnxruntime's summation order (a few float32 ulps)."""
    sb3 = pytest.importorskip("stable_baselines3")
    import torch

    from pacplan.export.policies import policy_onnx
    from pacplan.policy_certification.onnx_file import OnnxPolicy

    kwargs = {"policy_kwargs": {"activation_fn": getattr(torch.nn, activation)}} \
        if activation else {}
    getattr(sb3, algo)("MlpPolicy", env_id, seed=0, device="cpu", **kwargs).save(
        tmp_path / "model.zip")
    env = gym.make(env_id)
    data = (tmp_path / "model.zip").read_bytes()
    reader = SB3Policy("model.zip", data, env.observation_space, env.action_space)
    graph, converted = policy_onnx("model.zip", PolicyKind.SB3, data, env.observation_space,
                                   env.action_space)
    onnx = OnnxPolicy("model.onnx", graph, env.observation_space, env.action_space)
    obs = np.random.default_rng(0).normal(0.0, 2.0, (2000, spaces_dim(env))).astype(np.float32)
    want = np.array([reader.act(o) for o in obs])
    got = np.array([onnx.act(o) for o in obs])
    assert converted and got.dtype == want.dtype
    if isinstance(env.action_space, gym.spaces.Discrete):
        assert got.tolist() == want.tolist()
    else:
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def spaces_dim(env: gym.Env) -> int:
    return gym.spaces.flatdim(env.observation_space)


@pytest.mark.parametrize(("env_id", "n_out", "cost"), [("CartPole-v1", 2, "return"),
                                                       ("Pendulum-v1", 1, "terminated")])
def test_an_onnx_policy_ships_as_certified_and_acts_the_same(env_id: str, n_out: int,
                                                             cost: str, tmp_path: Path) -> None:
    """An .onnx policy is copied byte for byte; the runtime acts as certify-policy's reader
    (argmax for Discrete; the box action clipped, here often, and cast to the box's dtype)."""
    from pacplan.policy_certification.onnx_file import OnnxPolicy

    env = gym.make(env_id)
    model = tmp_path / "policy.onnx"
    onnx_linear(model, spaces_dim(env), n_out, scale=3.0)
    bounds = {"return_bounds": [0, 20]} if cost == "return" else {}
    certify_policy(env_id, [str(model)], n=10, cost=cost, horizon=20, out=tmp_path / "c",
                   **bounds)
    out = export_planner(tmp_path / "c", tmp_path / "p")
    assert verify_planner(out).n == 10
    assert sha256_file(out / "policies" / "0.onnx") == sha256_file(model)
    assert not (out / "sources").exists()
    reader = OnnxPolicy(str(model), model.read_bytes(), env.observation_space, env.action_space)
    planner = Planner.load(out)
    assert planner.horizon == 20  # what the costs were measured under, for the integrator
    assert planner.cost_rule is not None and planner.cost_rule["cost"] == cost
    ep = planner.episode(np.random.default_rng(0))
    obs = np.random.default_rng(1).normal(0.0, 2.0, (500, spaces_dim(env))).astype(np.float32)
    got = [ep.act(o).action for o in obs]
    want = [reader.act(o) for o in obs]
    assert all(np.array_equal(a, b) and np.asarray(a).dtype == np.asarray(b).dtype
               for a, b in zip(got, want))


def test_refusals_are_one_line_and_leave_nothing_behind(certified: Path, tmp_path: Path,
                                                        capsys) -> None:
    out = tmp_path / "out"
    callable_dir = tmp_path / "callable"
    certify_policy("CartPole-v1", ["user_policies:balance"], n=10, cost="terminated",
                   horizon=20, out=callable_dir)
    code, _, err = cli(["export", str(callable_dir), "--out", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "policy user_policies:balance is a module:callable" in err and not out.exists()

    zip_path = certified / json.loads((certified / "certificate.json").read_text())[
        "provenance"]["certify_policy"]["policy_files"][0]["path"]
    np.savez(tmp_path / "vecnormalize.npz", mean=np.zeros(4), var=np.ones(4), clip_obs=10.0,
             epsilon=1e-8)
    certify_policy("CartPole-v1", [zip_path], n=10, cost="terminated", horizon=20,
                   obs_normalization=tmp_path / "vecnormalize.npz", out=tmp_path / "normed")
    with pytest.raises(PacplanError, match=r"normalized with VecNormalize statistics"):
        export_planner(tmp_path / "normed", out)

    bare = Path(shutil.copytree(certified, tmp_path / "uncertified"))
    (bare / "certificate.json").unlink()
    with pytest.raises(PacplanError, match=r"no certificate\.json yet, nothing certified"):
        export_planner(bare, out)
    with pytest.raises(PacplanError, match=r"not a run directory .* nor a certify-policy folder"):
        export_planner(tmp_path, out)
    with pytest.raises(PacplanError, match=r"--n 7: .* holds no certificate for N = 7 "
                                           r"\(it has N100\)"):
        export_planner(certified, out, n=7)
    assert not out.exists()

    out.mkdir()  # an empty folder is emptied again when the export fails half-way
    import pacplan.export.policies as policies

    def full_disk(*_: Any) -> None:
        raise OSError(28, "No space left on device")

    original = policies.atomic_write_json
    policies.atomic_write_json = full_disk  # type: ignore[assignment]
    try:
        with pytest.raises(OSError):
            export_planner(certified, out)
    finally:
        policies.atomic_write_json = original  # type: ignore[assignment]
    assert out.is_dir() and list(out.iterdir()) == []


def test_verify_and_load_name_an_edited_planner(planner: Path, tmp_path: Path) -> None:
    def edited(edit: Any) -> Path:
        copy = Path(shutil.copytree(planner, tmp_path / f"copy{len(list(tmp_path.iterdir()))}"))
        edit(copy)
        manifest = json.loads((copy / "manifest.json").read_text())
        manifest["files"] = {f.relative_to(copy).as_posix(): sha256_file(f)
                             for f in sorted(copy.rglob("*"))
                             if f.is_file() and f.name != "manifest.json"}
        (copy / "manifest.json").write_text(json.dumps(manifest))  # re-hashed, as an editor would
        return copy

    def spec_edit(field: str, value: Any) -> Any:
        def edit(copy: Path) -> None:
            spec = json.loads((copy / "planner.json").read_text())
            spec[field] = value
            (copy / "planner.json").write_text(json.dumps(spec))
        return edit

    p = edited(spec_edit("action", {"space": "discrete", "n": 2, "start": 1}))
    with pytest.raises(PacplanError, match=r"planner\.json: field action is not what"):
        verify_planner(p)
    for bad in (0, "50", True):
        with pytest.raises(PlannerError, match="field horizon must be a whole number of steps"):
            Planner.load(edited(spec_edit("horizon", bad)))
    with pytest.raises(PlannerError, match="field cost must be the cost rule"):
        Planner.load(edited(spec_edit("cost", "return")))
    p = edited(spec_edit("certified_cost", 0.01))
    with pytest.raises(PlannerError, match="certified_cost or delta is not the certificate's"):
        Planner.load(p)
    with pytest.raises(PacplanError, match="certified_cost"):
        verify_planner(p)

    p = edited(lambda copy: (copy / "evidence" / "notes.txt").write_text("unchecked"))
    with pytest.raises(PacplanError, match=r"evidence/notes\.txt: not a file pacplan export"):
        verify_planner(p)

    def swap_model(copy: Path) -> None:
        onnx_linear(copy / "policies" / "0.onnx", 4, 2, scale=1.0)
    p = edited(swap_model)
    with pytest.raises(PacplanError, match=r"0\.onnx: not the ONNX conversion of sources/0\.zip"):
        verify_planner(p)
    (p / "policies" / "0.onnx").write_bytes(b"changed")
    with pytest.raises(PlannerError, match=r"0\.onnx: sha256 .* \(the file was changed\)"):
        Planner.load(p)

    p = edited(lambda copy: _onnx_endless_loop(copy / "policies" / "0.onnx"))
    previous = signal.signal(signal.SIGALRM, _too_long)
    signal.alarm(30)  # the load used to hang here for ever
    try:
        with pytest.raises(PlannerError, match=r"0\.onnx: node 'spin' \(Loop\) in its graph "
                                               r"is control flow"):
            Planner.load(p)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _too_long(*_: Any) -> None:
    raise AssertionError("Planner.load did not return within 30 s")


def _onnx_endless_loop(path: Path) -> None:
    """A Loop with no trip count and a condition that stays true: it never ends."""
    from onnx import TensorProto, helper, numpy_helper

    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1, 2])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "cond", "start"], ["out"], name="spin", body=body)],
        "policy", [helper.make_tensor_value_info("obs", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(True), "cond"),
         numpy_helper.from_array(np.zeros((1, 2), np.float32), "start")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())


def test_a_certify_policy_folder_is_monitored_directly(certified: Path, tmp_path: Path,
                                                       capsys) -> None:
    """The monitor needs the certificate, not a planner (a callable cannot be exported): a
    certify-policy folder is watched against its verified certificate.json, as its planner
    would be; a folder whose matrix was changed is refused."""
    certified_cost = json.loads((certified / "certificate.json").read_text())["certified"]
    (tmp_path / "ok.csv").write_text("0\n" * 50)
    (tmp_path / "bad.csv").write_text("1\n" * 400)
    code, out, err = cli(["monitor", str(certified), str(tmp_path / "ok.csv")], capsys)
    assert code == 0, err
    assert f"certified cost ≤ {100 * certified_cost:.2f} %" in out and "holding" in out
    code, out, _ = cli(["monitor", str(certified), str(tmp_path / "bad.csv")], capsys)
    assert code == 1 and "ALARM" in out
    tampered = Path(shutil.copytree(certified, tmp_path / "tampered"))
    matrix = tampered / "costs" / "cert.npy"
    np.save(matrix, np.zeros_like(np.load(matrix)))
    code, _, err = cli(["monitor", str(tampered), str(tmp_path / "ok.csv")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cert.npy" in err, err


def test_report_of_a_certify_policy_folder(certified: Path, tmp_path: Path, capsys) -> None:
    folder = Path(shutil.copytree(certified, tmp_path / "folder"))
    code, text, _ = cli(["report", str(folder)], capsys)
    assert code == 0 and "report.md" in text, text
    report = (folder / "report.md").read_text()
    assert "CartPole-v1" in report and "**certified**" in report and "ppo-cartpole.zip" in report
    assert (folder / "report.html").is_file() and not (folder / "run.lock").exists()
    code, _, _ = cli(["verify", str(folder / "certificate.json")], capsys)
    assert code == 0  # the report's files do not disturb the folder
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = cli(["report", str(empty)], capsys)
    assert code == 2 and "has no certificates yet" in err and list(empty.iterdir()) == []
    (folder / "certificate.json").unlink()
    code, _, err = cli(["report", str(folder)], capsys)
    assert code == 2 and "no certificate.json yet" in err and not (folder / "run.lock").exists()
    from pacplan.report.document import write_report

    with pytest.raises(PacplanError, match="is a certify-policy folder, not a run directory"):
        write_report(folder)


def test_every_n_certified_is_reported_and_exportable(tmp_path: Path, capsys) -> None:
    """Certified at N = 20, then grown to N = 40: the report has a row for each (their
    certified values those of certificates/), the run report's figures in figures/, embedded in
    report.html, and the folder still verifies; `export --n 20` ships the N = 20 certificate,
    which verify and the runtime accept, and an N never certified is one line."""
    out = tmp_path / "grown"
    model = tmp_path / "policy.onnx"
    onnx_linear(model, 4, 2)
    args = {"return_bounds": (0, 50), "horizon": 50, "test_n": 10, "out": out}
    certify_policy("CartPole-v1", [str(model)], n=20, **args)
    certify_policy("CartPole-v1", [str(model)], n=40, **args)
    code, _, err = cli(["report", str(out)], capsys)
    assert code == 0, err
    report = (out / "report.md").read_text()
    for path in sorted((out / "certificates").glob("N*.json")):
        c = json.loads(path.read_text())
        assert f"| {c['n']} |" in report and f"**{100 * c['certified']:.2f} %**" in report
    assert len(list((out / "certificates").glob("N*.json"))) == 2
    for name in ("bounds_vs_n.png", "posterior.png", "costs.png"):
        assert (out / "figures" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"figures/{name}" in report
    assert (out / "report.html").read_text().count("data:image/png;base64,") == 3
    code, _, err = cli(["verify", str(out / "certificate.json")], capsys)
    assert code == 0, err
    n20 = json.loads((out / "certificates" / "N20-T10-delta0.01.json").read_text())
    code, _, err = cli(["export", str(out), "--out", str(tmp_path / "p20"), "--n", "20"], capsys)
    assert code == 0, err
    assert Planner.load(tmp_path / "p20").certified_cost == n20["certified"]
    assert verify_planner(tmp_path / "p20").n == 20
    code, _, err = cli(["export", str(out), "--out", str(tmp_path / "p7"), "--n", "7"], capsys)
    assert code == 2 and "holds no certificate for N = 7 (it has N20, N40)" in err, err
    assert not (tmp_path / "p7").exists()
