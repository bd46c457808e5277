"""`pacplan.runtime`: the exported planner, driven through the Gymnasium envs, makes the
certified decisions and earns the certified costs; it is used as certified or warns."""

from __future__ import annotations

import ast
import json
import shlex
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import pacplan  # noqa: F401  (registers the env ids)
from helpers import run_policy_family
from pacplan.export import export_planner
from pacplan.runtime import Planner, PlannerError, UncertifiedUseWarning

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
RUNTIME = ROOT / "runtime" / "src" / "pacplan_runtime"


def _quadruped_env() -> gym.Env:
    """The Gymnasium env of the world the shipped quadruped run certified (its recorded
    options: engine, robot, slopes), so its costs are that run's."""
    cert = json.loads((RESULTS / "quadruped" / "certificate.json").read_text())
    options = cert["provenance"]["world"]["options"]
    return gym.make("pacplan/MinitaurTerrain-v0", **options).unwrapped


@pytest.fixture(scope="module")
def planners(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("planners")
    return {w: export_planner(RESULTS / w, base / w) for w in ("uav", "quadruped")}


def test_runtime_imports_no_other_pacplan_module_nor_torch() -> None:
    """Only numpy, onnxruntime, the standard library and pacplan_runtime itself."""
    allowed = {"numpy", "onnxruntime", "pacplan_runtime"}
    for file in RUNTIME.glob("*.py"):
        for node in ast.walk(ast.parse(file.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                top = name.split(".")[0]
                assert top in allowed | set(sys.stdlib_module_names), (file.name, name)
    code = ("import sys, pacplan_runtime; "
            "print(sorted({'torch', 'pybullet', 'safetensors'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_uav_closed_loop_matches_the_certified_costs(planners: dict[str, Path]) -> None:
    """500 test environments, one policy drawn from p per episode: the runtime's primitives,
    flown in the Gym env, earn exactly the cost in the run's test matrix (World.costs of the
    certified run), and replay the world's primitive sequences."""
    from pacplan.worlds.uav import UAVWorld

    planner = Planner.load(planners["uav"])
    test = np.load(RESULTS / "uav" / "costs" / "test.npy")
    thetas = np.load(RESULTS / "uav" / "policies.npy")
    env = gym.make("pacplan/UAVObstacleField-v0").unwrapped
    rng = np.random.default_rng(7)
    seeds = np.arange(200_000, 200_500)
    drawn, costs, flown, margin = [], [], [], np.inf
    for seed in seeds:
        drawn.append(planner.start_episode(rng))
        obs, _ = env.reset(options={"scene_seed": int(seed)})
        total, done, seq = 0.0, False, []
        while not done:
            decision = planner.act(obs)
            top = np.sort(decision.scores)[-2:]
            margin = min(margin, float(top[1] - top[0]))
            seq.append(decision.primitive)
            obs, reward, done, _, _ = env.step(decision.primitive)
            total += reward
        planner.end_episode()
        costs.append(-total)
        flown.append(seq)
    env.close()
    drawn = np.array(drawn)
    assert len(set(drawn)) > 1  # more than the most likely policy was drawn
    np.testing.assert_array_equal(np.array(costs), test[seeds - 200_000, drawn])
    world = UAVWorld(compile=False, **run_policy_family(RESULTS / "uav"))  # as certified
    for k in np.unique(drawn)[:3]:
        rows = np.nonzero(drawn == k)[0][:20]
        res = world.rollouts(thetas[k : k + 1], seeds[rows])
        for j, i in enumerate(rows):
            assert flown[i] == [int(p) for p in res.prims[j, 0] if p >= 0]
    print(f"smallest gap between the two best scores: {margin:.3g} m")


def _quadruped_decisions(planner_dir: Path, seeds: range) -> None:
    """At reset, the runtime's η is bit for bit the certified policy's action."""
    from pacplan.worlds.quadruped.gait import GaitParams
    from pacplan.worlds.quadruped.policy import policy_action

    planner = Planner.load(planner_dir)
    thetas = np.load(RESULTS / "quadruped" / "policies.npy")
    env = _quadruped_env()
    rng = np.random.default_rng(1)
    for seed in seeds:
        obs, _ = env.reset(options={"terrain_seed": seed})
        k = planner.start_episode(rng)
        decision = planner.act(obs)
        eta = policy_action(thetas[k], obs["depth"], obs["proprio"])
        np.testing.assert_array_equal(decision.eta, eta)
        gait = GaitParams.from_policy_output(eta)
        assert (decision.a1, decision.a2, decision.a_st, decision.omega) == \
            (gait.a1, gait.a2, gait.a_st, gait.omega)
        planner.end_episode()
    env.close()


def _quadruped_closed_loop(planner_dir: Path, seeds: range) -> None:
    """Full PyBullet episodes: the Gym env's cost equals the run's test-matrix entry."""
    planner = Planner.load(planner_dir)
    test = np.load(RESULTS / "quadruped" / "costs" / "test.npy")
    env = _quadruped_env()
    rng = np.random.default_rng(2)
    for seed in seeds:
        obs, _ = env.reset(options={"terrain_seed": seed})
        k = planner.start_episode(rng)
        while True:
            obs, _, terminated, truncated, info = env.step(planner.act(obs).eta)
            if terminated or truncated:
                break
        planner.end_episode()
        assert info["cost"] == test[seed - 200_000, k], seed
    env.close()


def test_quadruped_decisions_and_costs(planners: dict[str, Path]) -> None:
    _quadruped_decisions(planners["quadruped"], range(300_000, 300_050))
    _quadruped_closed_loop(planners["quadruped"], range(200_000, 200_003))


@pytest.mark.slow
def test_quadruped_decisions_and_costs_at_scale(planners: dict[str, Path]) -> None:
    _quadruped_decisions(planners["quadruped"], range(300_000, 300_500))
    _quadruped_closed_loop(planners["quadruped"], range(200_000, 200_020))


def test_certified_use_and_its_warnings(planners: dict[str, Path]) -> None:
    planner = Planner.load(planners["uav"])
    image = np.full((50, 50), 20.0, np.float32)
    with pytest.raises(PlannerError, match="before start_episode"):
        planner.act(image)
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the certified use warns about nothing
        draws = []
        for _ in range(4000):
            draws.append(planner.start_episode(rng))
            planner.end_episode()
    # every support policy is drawn at its probability (3.3 standard errors at p = 0.5)
    shares = [np.mean(np.array(draws) == idx) for idx in planner.policy_index]
    assert np.max(np.abs(np.array(shares) - planner.probability)) < 0.026
    assert set(draws) <= set(planner.policy_index.tolist())
    most_likely = int(planner.policy_index[np.argmax(planner.probability)])
    planner.start_episode(rng)
    planner.act(image)
    with pytest.warns(UncertifiedUseWarning, match="mid-episode"):
        planner.start_episode(rng)
    planner.end_episode()
    with pytest.warns(UncertifiedUseWarning, match="most likely"):
        assert planner.use_most_likely() == most_likely
    with pytest.raises(PlannerError, match="float"):
        planner.act(np.zeros((1, 50, 50), np.uint8))
    with pytest.raises(PlannerError, match="finite"):
        planner.act(np.full((50, 50), np.nan, np.float32))


def test_load_refuses_a_changed_file(planners: dict[str, Path], tmp_path: Path) -> None:
    planner = Path(shutil.copytree(planners["uav"], tmp_path / "p"))
    spec = (planner / "planner.json").read_text().replace('"net_scale": 5.0', '"net_scale": 50.0')
    (planner / "planner.json").write_text(spec)
    with pytest.raises(PlannerError, match=r"planner\.json: sha256 .* \(the file was changed\)"):
        Planner.load(planner)


def _deploy_commands() -> list[str]:
    """The shell lines of docs/deploy.md's 'Install on the robot' block, comments dropped."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    section = text.split("## Install on the robot", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_deploy_install_commands_name_the_runtime_wheel_this_repo_builds() -> None:
    """The wheel file docs/deploy.md installs is the one `pip wheel ./runtime` names."""
    import pacplan_runtime

    build, install = _deploy_commands()
    assert build == "pip wheel --no-deps --wheel-dir dist ./runtime"
    assert install == f"pip install pacplan_runtime-{pacplan_runtime.__version__}-py3-none-any.whl"


@pytest.mark.slow
def test_runtime_wheel_in_a_bare_venv(planners: dict[str, Path], tmp_path: Path) -> None:
    """docs/deploy.md's install commands, verbatim: the wheel built from a copy of runtime/ is
    under 200 kB and needs only numpy and onnxruntime; installed into a bare venv (they come
    from the index, no torch, no errors) it loads both shipped planners and decides."""
    build, install = _deploy_commands()
    clone = tmp_path / "clone"
    shutil.copytree(ROOT / "runtime", clone / "runtime",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    run = subprocess.run([sys.executable, "-m", *shlex.split(build)], cwd=clone,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    (wheel,) = (clone / "dist").glob("pacplan_runtime-*.whl")
    assert wheel.stat().st_size < 200_000, wheel.stat().st_size
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    requires = [line.split(":", 1)[1].strip()
                for line in zipfile.ZipFile(wheel).read(meta).decode().splitlines()
                if line.startswith("Requires-Dist:")]
    assert sorted(r.split(">")[0].split("=")[0] for r in requires) == ["numpy", "onnxruntime"]

    robot = tmp_path / "robot"
    robot.mkdir()
    shutil.copy2(wheel, robot / wheel.name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    run = subprocess.run([python, "-m", *shlex.split(install)], cwd=robot, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "torch" not in run.stdout + run.stderr and "ERROR" not in run.stderr, run.stderr
    code = (
        "import importlib.util, sys, numpy as np\n"
        "from pacplan_runtime import Planner\n"
        "for w in ('uav', 'quadruped'):\n"
        "    p = Planner.load(sys.argv[1] + '/' + w)\n"
        "    p.start_episode(np.random.default_rng(0))\n"
        "    obs = np.full((50, 50), 5.0, np.float32)\n"
        "    if w == 'quadruped': obs = {'depth': obs, 'proprio': np.zeros(22, np.float32)}\n"
        "    print(w, p.act(obs))\n"
        "absent = ('torch', 'pybullet', 'gymnasium', 'safetensors', 'pydantic', 'pacplan')\n"
        "assert not [m for m in absent if importlib.util.find_spec(m)], 'installed'\n"
    )
    out = subprocess.run([python, "-c", code, str(planners["uav"].parent)],
                         capture_output=True, text=True, cwd=robot)
    assert out.returncode == 0, out.stderr
    assert "PrimitiveDecision(primitive=" in out.stdout and "GaitDecision(eta=" in out.stdout


def test_pacplan_runtime_is_an_alias_of_pacplan_runtime() -> None:
    """One module under two names: an error raised by pacplan_runtime is pacplan.runtime's."""
    import pacplan.runtime
    import pacplan.runtime.monitor
    import pacplan_runtime
    import pacplan_runtime.monitor

    assert pacplan.runtime.Planner is pacplan_runtime.Planner
    assert pacplan.runtime.monitor is pacplan_runtime.monitor
    with pytest.raises(pacplan.runtime.PlannerError, match="not a planner directory"):
        pacplan_runtime.Planner.load(ROOT / "docs")
