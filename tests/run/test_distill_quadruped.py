"""The quadruped's distillation: labelled states are the teacher's, the fit is the net that
walks, targets prefer the constant gait on ties, the stage refuses before any work and resumes
to the bit."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.run import distill as stage
from pacplan.worlds.quadruped import distill as qd
from pacplan.worlds.quadruped.policy import POLICY_DIM, gait_theta, policy_output
from pacplan.worlds.quadruped.teacher import BEST_CONSTANT_GAIT, TeacherConfig

pytest.importorskip("mujoco")

# 1 s episodes (2 primitives): each label costs a look-ahead, so the tests walk little
WORLD = {"physics": "mujoco", "robot": "derpy", "horizon_s": 1.0}
TINY = {"envs": 2, "rounds": 1, "epochs": 2, "batch": 4, "lr": 0.01, "eval_envs": 2,
        "workers": 1, "target_temperature": 0.05}


def _cfg(options: dict | None = None, **distill: object) -> object:
    return parse_config({
        "name": "q", "world": {"name": "quadruped", "options": options or WORLD},
        "seeds": {"prior": [0, 1000], "prior_eval": [300000, 300100], "cert": [100000, 100100],
                  "test": [200000, 200100]},
        "distill": {**TINY, **distill},
        "es": {"iterations": 1, "envs_per_iter": 2, "pairs_per_env": 1, "init_var": 0.001,
               "shared_perturbations": True},
        "executor": {"kind": "serial"},
    })


def _random_data(k: int, seed: int = 0) -> qd.Labelled:
    rng = np.random.default_rng(seed)
    return qd.Labelled(
        seed=np.arange(k, dtype=np.int64), primitive=np.zeros(k, np.int64),
        depth=rng.uniform(0.3, 10.0, (k, 50, 50)).astype(np.float32),
        proprio=(rng.normal(size=(k, 22)) * np.geomspace(0.01, 50, 22)).astype(np.float32),
        scores=rng.normal(size=(k, 12)))


def test_targets_are_the_best_candidate_when_cold_and_the_constant_gait_on_ties() -> None:
    cfg = TeacherConfig()
    etas = qd.candidate_etas(cfg)
    scores = np.random.default_rng(1).normal(size=(50, 12))
    cold = qd.targets(scores, etas, 1e-6)
    assert np.allclose(cold, etas[scores.argmax(axis=1)])
    tied = np.zeros((3, 12))
    default = cfg.candidates.index(cfg.follow)
    kept = qd.targets(tied, etas, 0.005, default, 0.05)
    assert np.allclose(kept, etas[default], atol=1e-2)
    assert np.allclose(qd.targets(tied, etas, 0.01), etas.mean(axis=0))  # no bonus: the mean


def test_candidate_etas_map_back_to_the_candidates() -> None:
    from pacplan.worlds.quadruped.gait import GaitParams

    cfg = TeacherConfig()
    for eta, gait in zip(qd.candidate_etas(cfg), cfg.candidates, strict=True):
        back = GaitParams.from_policy_output(eta)
        assert back.a1 == pytest.approx(gait.a1, abs=0.8 * qd.ETA_FLOOR + 1e-9)
        assert back.a2 == pytest.approx(gait.a2, abs=0.8 * qd.ETA_FLOOR + 1e-9)
        assert back.omega == pytest.approx(gait.omega, abs=20 * qd.ETA_FLOOR + 1e-9)


def test_fit_folds_the_standardisation_into_the_net_exactly() -> None:
    data = _random_data(16)
    theta = np.random.default_rng(2).normal(scale=0.05, size=POLICY_DIM)
    same, _ = qd.fit(theta, data, np.full((16, 4), 0.5), epochs=0, lr=0.01, batch=4, seed=0)
    assert np.allclose(same, theta, rtol=1e-10, atol=1e-12)


def test_fit_lowers_the_numpy_nets_error_on_its_targets() -> None:
    data = _random_data(64)
    rng = np.random.default_rng(3)
    hidden = gait_theta(BEST_CONSTANT_GAIT) * 0.3 + rng.normal(scale=0.02, size=POLICY_DIM)
    target = np.stack([policy_output(hidden, data.depth[i], data.proprio[i]) for i in range(64)])
    start = gait_theta(BEST_CONSTANT_GAIT)

    def error(theta: np.ndarray) -> float:  # the walking net (numpy) is the oracle
        eta = np.stack([policy_output(theta, data.depth[i], data.proprio[i]) for i in range(64)])
        return float(((eta - target) ** 2).sum(axis=1).mean())

    theta, losses = qd.fit(start, data, target, epochs=30, lr=0.01, batch=16, seed=0)
    assert error(theta) < 0.5 * error(start)
    assert losses[-1] < losses[0]
    again, _ = qd.fit(start, data, target, epochs=30, lr=0.01, batch=16, seed=0)
    assert np.array_equal(theta, again)  # deterministic: a resumed round is the same bits


def test_labelled_episode_is_the_teachers_own_and_a_student_walks_its_gait() -> None:
    from pacplan.worlds.base import make_world
    from pacplan.worlds.quadruped.teacher import QuadrupedTeacher

    world = make_world("quadruped", **WORLD)
    teacher = QuadrupedTeacher(world)
    data, cost = qd.label_episode(world, teacher, 7)
    own = teacher.rollout(7)
    assert cost == own.result.cost
    assert len(data) == len(own.decisions) == 2
    assert np.array_equal(data.scores, np.stack([d.scores for d in own.decisions]))
    assert data.depth.shape == (2, 50, 50) and data.proprio.shape == (2, 22)
    gait = gait_theta(BEST_CONSTANT_GAIT)
    data, cost = qd.label_episode(world, teacher, 7, gait.astype(np.float32))
    assert cost == world.rollout(gait.astype(np.float32), 7).cost  # the student's gait walked
    assert data.scores.shape == (2, 12)


@pytest.mark.parametrize(("options", "distill", "message"), [
    ({"physics": "bullet", "robot": "derpy"}, {}, "physics 'bullet' cannot"),
    ({**WORLD, "robot": "minitaur"}, {}, "made for robot 'derpy'"),
    (WORLD, {"clear_cap": 0.5}, "distill.clear_cap is a setting of the UAV's teacher"),
])
def test_refuses_before_any_work(tmp_path: Path, options: dict, distill: dict,
                                 message: str) -> None:
    with pytest.raises(PacplanError, match=message) as exc:
        stage.distill(_cfg(options, **distill), tmp_path / "run")
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "run").exists()


def test_refuses_teacher_seeds_overlapping_certification(tmp_path: Path) -> None:
    cfg = _cfg()
    cfg.seeds.cert = (0, 100)
    with pytest.raises(PacplanError, match="overlap"):
        stage.distill(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_stage_resumes_to_the_bit(tmp_path: Path) -> None:
    cfg = _cfg()
    theta_file = stage.distill(cfg, tmp_path / "run")
    out = tmp_path / "run" / "distill"
    first = hashlib.sha256(theta_file.read_bytes()).hexdigest()
    summary = stage.distilled_summary(theta_file)
    assert summary["teacher"].startswith("quadruped look-ahead")
    assert summary["eval_envs"] == 2 and 0.0 <= summary["eval_cost"] <= 1.0
    # a kill after round 0: round 1's labels and weights and the result are gone
    for name in ("theta.safetensors", "round-1.safetensors", "labels-1/0.npz"):
        (out / name).unlink()
    again = stage.distill(cfg, tmp_path / "run")
    assert hashlib.sha256(again.read_bytes()).hexdigest() == first
    (out / "round-1.safetensors").write_bytes(b"edited")
    (out / "theta.safetensors").unlink()
    with pytest.raises(PacplanError, match="has changed or is corrupted"):
        stage.distill(cfg, tmp_path / "run")
