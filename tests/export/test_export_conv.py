"""`pacplan export` of a UAV run of the conv policy family (`policy: conv`): the planner verifies,
the runtime flies it as the world does (its decisions are the reference module's, its episodes
cost what the certificate's matrix says), and what it cannot fly is refused in one line: a
family or size it does not know, fixed parts that are not the world's, and a prior of another
family's size.

The run is tiny (width 1, 3 policies, N = 8, one ES iteration: about 10 s)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from safetensors.numpy import save_file

import pacplan  # noqa: F401  (registers the env ids)
from helpers import cli
from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.export import export_planner, verify_planner
from pacplan.io.files import sha256_file
from pacplan.pipeline.pipeline import run
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.conv_policy import ConvNet
from pacplan.worlds.uav.export import uav_conv_net_onnx
from pacplan.worlds.uav.families import CONV_DEFAULT_WIDTH, CONV_WIDTHS, policy_family
from pacplan.worlds.uav.policy import FilterCells
from pacplan_runtime import Planner, PlannerError
from pacplan_runtime import spec as rt

OPTIONS = {"policy": "conv", "policy_width": 1, "compile": False}
CERT = (10_000, 10_008)


def _config(options: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "uav-conv-export-test",
        "world": {"name": "uav", "options": options},
        "seeds": {"prior": [0, 100], "cert": list(CERT), "test": [20_000, 20_004]},
        "es": {"iterations": 1, "envs_per_iter": 2, "pairs_per_env": 1, "seed": 1},
        "executor": {"kind": "serial", "chunk_policies": 8, "chunk_seeds": 8},
        "policies": {"m": 3, "seed": 3},
        "certificate": {"n": [8], "delta": 0.05},
        "report": {"trajectories": 0},
    }


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    out = tmp_path_factory.mktemp("conv")
    run(parse_config(_config(OPTIONS)), out / "run", progress=False)
    return out / "run", export_planner(out / "run", out / "planner")


def _tampered(planner: Path, tmp_path: Path, edit: Any) -> Path:
    """A copy of the planner with planner.json edited and every hash redone to match."""
    copy = Path(shutil.copytree(planner, tmp_path / "planner"))
    data = json.loads((copy / "planner.json").read_text())
    edit(data)
    (copy / "planner.json").write_text(json.dumps(data))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["files"] = {f: sha256_file(copy / f) for f in manifest["files"]}
    (copy / "manifest.json").write_text(json.dumps(manifest))
    return copy


def test_runtime_knows_pacplans_conv_family() -> None:
    """The runtime's copy of the family (it imports no pacplan): net hash, sizes, widths."""
    assert hashlib.sha256(uav_conv_net_onnx()).hexdigest() in rt.UAV_NET_SHA256["conv"]
    assert rt.UAV_CONV_WIDTHS == CONV_WIDTHS and rt.UAV_CONV_DEFAULT_WIDTH == CONV_DEFAULT_WIDTH
    for w in CONV_WIDTHS:
        sizes = rt.uav_net_sizes({"policy": "conv", "policy_width": w})
        shapes = dict(policy_family("conv", w).shapes)
        assert shapes["conv2.weight"][:2] == (sizes["width2"], sizes["width"])
        assert shapes["fc1.weight"][1] == sizes["features"]
    assert rt.uav_net_sizes({}) == {}  # the paper's net: every size is fixed


def test_conv_planner_verifies_and_records_its_family(exported, capsys) -> None:
    _, planner_dir = exported
    code, out, err = cli(["verify", str(planner_dir)], capsys)
    assert code == 0 and "OK planner" in out, err
    fixed = json.loads((planner_dir / "planner.json").read_text())["fixed"]
    assert (fixed["policy"], fixed["policy_width"]) == ("conv", 1)
    assert (planner_dir / "net.onnx").read_bytes() == uav_conv_net_onnx()


def test_runtime_decisions_are_the_reference_modules(exported) -> None:
    """The runtime's scores are the float32 module's plus the Depth Filter's, within 1e-5 m,
    and it flies their best primitive (the tie-break order on exact ties)."""
    run_dir, planner_dir = exported
    planner = Planner.load(planner_dir)
    policies = np.load(run_dir / "policies.npy")
    images = np.random.default_rng(0).uniform(0.2, spec.FAR, (6, 50, 50)).astype(np.float32)
    images[0] = spec.FAR  # open space: every cell ties
    cells = FilterCells()
    for slot, k in enumerate(planner.policy_index):
        net = ConvNet(1).load_flat(policies[k])
        with torch.no_grad():
            x = torch.as_tensor(images)
            ref = (cells.scores(x) + 5.0 * net(x[:, None] / spec.FAR)).numpy()
        for img, expected in zip(images, ref, strict=True):
            decision = planner._decide(slot, img)
            np.testing.assert_allclose(decision.scores, expected, rtol=0, atol=1e-5)
            best = expected.max()
            order = [j for j in spec.tie_break_order() if expected[j] >= best - 1e-5]
            assert decision.primitive == order[0] or expected[decision.primitive] >= best - 1e-5


def test_runtime_closed_loop_earns_the_certified_costs(exported) -> None:
    """Every support policy, acting through the runtime in the Gym env on the certification
    seeds, earns exactly the cost the certificate's matrix holds for it."""
    run_dir, planner_dir = exported
    planner = Planner.load(planner_dir)
    cert = np.load(run_dir / "costs" / "cert.npy")
    env = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    for slot, k in enumerate(planner.policy_index):
        for row, seed in enumerate(range(*CERT)):
            obs, _ = env.reset(options={"scene_seed": seed})
            total, done = 0.0, False
            while not done:
                obs, reward, done, _, _ = env.step(planner._decide(slot, obs).primitive)
                total += reward
            assert -total == cert[row, k], (seed, k)
    env.close()


@pytest.mark.parametrize("edit,names", [
    (lambda d: d["fixed"].update(policy="resnet"), ["fixed.policy", "paper, conv", "resnet"]),
    (lambda d: d["fixed"].update(policy_width=3), ["fixed.policy_width", "1, 2, 4, 8, 16"]),
    (lambda d: d["fixed"].update(policy_width=2), ["fixed.policy", "'conv', 2", "'conv', 1"]),
    (lambda d: d["fixed"].pop("policy"), ["fixed.policy_width", "absent"]),
])
def test_runtime_refuses_a_family_it_does_not_fly(exported, tmp_path: Path, edit: Any,
                                                  names: list[str], capsys) -> None:
    _, planner_dir = exported
    bad = _tampered(planner_dir, tmp_path, edit)
    with pytest.raises(PlannerError) as e:
        Planner.load(bad)
    message = str(e.value)
    assert "\n" not in message and all(n in message for n in names), message
    code, _, err = cli(["verify", str(bad)], capsys)
    assert code != 0 and err.strip().count("\n") == 0, err


def test_verify_names_the_family_and_both_sizes_of_wrong_policies(exported, tmp_path: Path
                                                                  ) -> None:
    """A planner re-labelled as width 2 is not the certificate's world; policies of width 1's
    size split for width 2 are refused naming the family and both sizes."""
    from pacplan.export.write import split_weights

    _, planner_dir = exported

    def wider(data: dict[str, Any]) -> None:
        data["fixed"]["policy_width"] = 2
        data["world"]["options"]["policy_width"] = 2

    with pytest.raises(PacplanError, match=r"world .*'policy_width': 2.* is not the "
                                           r"certificate's .*'policy_width': 1") as e:
        verify_planner(_tampered(planner_dir, tmp_path, wider))
    assert "\n" not in str(e.value)
    with pytest.raises(PacplanError, match=r"^policies.npy has 34380 weights per policy but the "
                                           r"uav \(policy conv, policy_width 2\) network has "
                                           r"65471$"):
        split_weights("uav", np.zeros((2, 34_380), np.float32),
                      {"policy": "conv", "policy_width": 2})


def test_a_prior_of_another_family_is_refused_naming_it_and_both_sizes(tmp_path: Path) -> None:
    prior = tmp_path / "paper-size.safetensors"
    save_file({"mu": np.zeros(13_943, np.float32), "logvar": np.zeros(13_943, np.float32)},
              str(prior))
    with pytest.raises(PacplanError) as e:
        run(parse_config(_config(OPTIONS)), tmp_path / "run", prior_file=prior, progress=False)
    assert str(e.value).endswith("mu has 13943 weights but world 'uav' (policy conv, "
                                 "policy_width 1) needs 34380"), str(e.value)
    wide = tmp_path / "conv-size.safetensors"
    save_file({"mu": np.zeros(34_380, np.float32), "logvar": np.zeros(34_380, np.float32)},
              str(wide))
    with pytest.raises(PacplanError, match=r"mu has 34380 weights but world 'uav' "
                                           r"\(policy paper\) needs 13943"):
        run(parse_config(_config({"compile": False})), tmp_path / "run2", prior_file=wide,
            progress=False)


def test_es_start_files_of_another_size_name_the_family(tmp_path: Path) -> None:
    mean = tmp_path / "mean.npy"
    np.save(mean, np.zeros(13_943, np.float32))
    cfg = _config(OPTIONS)
    cfg["es"]["init_mean"] = str(mean)
    with pytest.raises(PacplanError) as e:
        run(parse_config(cfg), tmp_path / "run", progress=False)
    message = str(e.value)
    assert "expected 34380" in message and "(13943,)" in message, message
    assert message.endswith("(policy conv, policy_width 1)"), message
