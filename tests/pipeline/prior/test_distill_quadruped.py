"""The quadruped's distillation: labelled states are the teacher's, the fit is the net that
walks, targets prefer the constant gait on ties, the stage refuses before any work and resumes
to the bit."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import load

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.pipeline.prior import distill as stage
from pacplan.worlds.quadruped import distill as qd
from pacplan.worlds.quadruped.policy import POLICY_DIM, gait_theta, policy_output
from pacplan.worlds.quadruped.teacher import BEST_CONSTANT_GAIT, TeacherConfig

pytest.importorskip("mujoco")

# 1 s episodes (2 primitives): each label costs a look-ahead, so the tests walk little
WORLD = {"physics": "mujoco", "robot": "derpy", "horizon_s": 1.0}
TINY = {"envs": 2, "rounds": 1, "epochs": 2, "batch": 4, "lr": 0.01, "eval_envs": 2,
        "workers": 1}


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
    etas = qd.candidate_etas(TeacherConfig())
    same, _ = qd.fit(theta, data, data.scores, etas, kernel=0.02, epochs=0, lr=0.01, batch=4,
                     seed=0)
    assert np.allclose(same, theta, rtol=1e-10, atol=1e-12)


def _nearest(theta: np.ndarray, data: qd.Labelled, etas: np.ndarray) -> np.ndarray:
    """The candidate nearest the walking net's η (numpy, the oracle) in each state."""
    eta = np.stack([policy_output(theta, data.depth[i], data.proprio[i])
                    for i in range(len(data))])
    return ((eta[:, None, :] - etas[None]) ** 2).sum(axis=2).argmin(axis=1)


def test_fit_learns_which_gait_scores_best_where() -> None:
    """States told apart by one proprioceptive value: gait 3 wins where it is positive, gait 11
    where not; every other gait falls (−10 m). The fitted net picks the winner in most states
    (chance: none, as it starts at gait 7), deterministically, and on the grid. (Gait 3's a1
    is the grid's low edge: a sigmoid of a linear function cannot sit there for all positive
    values, so a fit free to leave the grid picked 89 % right with 38 % of its η at gaits never
    scored, down to a1 = 0.2; within the box it picks about 80 % right.)"""
    data = _random_data(96)
    etas = qd.candidate_etas(TeacherConfig())
    positive = data.proprio[:, 5] > 0
    scores = np.full((96, 12), -10.0)
    scores[positive, 3] = 1.0
    scores[~positive, 11] = 1.0
    start = gait_theta(BEST_CONSTANT_GAIT)  # candidate 7: falls everywhere here
    theta, losses = qd.fit(start, data, scores, etas, kernel=0.02, epochs=60, lr=0.03,
                           batch=16, seed=0)
    want = np.where(positive, 3, 11)
    assert (_nearest(start, data, etas) == want).mean() == 0.0
    assert (_nearest(theta, data, etas) == want).mean() >= 0.75
    assert losses[-1] < losses[0]
    _assert_on_grid(theta, data, etas)
    again, _ = qd.fit(start, data, scores, etas, kernel=0.02, epochs=60, lr=0.03, batch=16,
                      seed=0)
    assert np.array_equal(theta, again)  # deterministic: a resumed round is the same bits


def test_fit_prefers_the_safe_gait_where_states_look_alike() -> None:
    """Identical observations: gait 11 wins 60 % of them by 1 m and falls in the rest, gait 7
    is 0.5 m everywhere. The mean of the winners would be 11; the expected score is 7's."""
    data = _random_data(50)
    data = qd.Labelled(data.seed, data.primitive, np.repeat(data.depth[:1], 50, 0),
                       np.repeat(data.proprio[:1], 50, 0), data.scores)
    etas = qd.candidate_etas(TeacherConfig())
    scores = np.full((50, 12), -10.0)
    scores[:, 7] = 0.5
    scores[:30, 11] = 1.0
    start = gait_theta(TeacherConfig().candidates[11])
    theta, _ = qd.fit(start, data, scores, etas, kernel=0.02, epochs=60, lr=0.03, batch=10,
                      seed=0)
    assert set(_nearest(theta, data, etas)) == {7}


def test_fit_stays_on_the_candidates_grid_when_an_edge_gait_wins() -> None:
    """Gait 0 (the grid's low corner) wins everywhere: the fit walks there and stops, not past
    it to gaits the teacher never scored (without the box term it went to η 0.08–0.34, a slow
    shuffle that walked 0.884 on held-out terrains)."""
    data = _random_data(64)
    etas = qd.candidate_etas(TeacherConfig())
    scores = np.full((64, 12), -10.0)
    scores[:, 0] = 1.0
    start = gait_theta(TeacherConfig().candidates[4])
    theta, _ = qd.fit(start, data, scores, etas, kernel=0.02, epochs=100, lr=0.03, batch=16,
                      seed=0)
    assert set(_nearest(theta, data, etas)) == {0}
    _assert_on_grid(theta, data, etas)


def _assert_on_grid(theta: np.ndarray, data: qd.Labelled, etas: np.ndarray) -> None:
    """Every η within the candidates' box widened by the fit's margin (and a little slack: the
    box term is a price, not a wall)."""
    eta = np.stack([policy_output(theta, data.depth[i], data.proprio[i])
                    for i in range(len(data))])
    slack = qd.OFF_GRID_MARGIN + 0.1
    assert (eta >= etas.min(axis=0) - slack).all() and (eta <= etas.max(axis=0) + slack).all()


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
    ({**WORLD, "physics": "ode"}, {}, "not physics 'ode'"),
    ({**WORLD, "robot": "minitaur"}, {}, "made for robot 'derpy'"),
    (WORLD, {"clear_cap": 0.5}, "distill.clear_cap is a setting of the UAV's teacher"),
])
def test_refuses_before_any_work(tmp_path: Path, options: dict, distill: dict,
                                 message: str) -> None:
    with pytest.raises(PacplanError, match=message) as exc:
        stage.distill(_cfg(options, **distill), tmp_path / "run")
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "run").exists()


def test_a_frozen_config_with_every_setting_stated_is_accepted(tmp_path: Path) -> None:
    """A run's frozen config.yaml states every distill setting, the UAV teacher's at their
    defaults: resuming from it (`train-prior RUN/config.yaml --out RUN`) was refused."""
    from pacplan.config import config_to_dict, load_config
    from pacplan.io.yamlio import yaml_text

    frozen = tmp_path / "config.yaml"
    frozen.write_text(yaml_text(config_to_dict(_cfg())), encoding="utf-8")
    cfg = load_config(frozen)
    assert "clear_cap" in cfg.distill.model_fields_set
    stage.check_request(cfg)  # no refusal
    cfg.distill.clear_cap = 0.5  # a UAV setting changed from its default is still refused
    with pytest.raises(PacplanError, match=r"distill\.clear_cap is a setting of the UAV's"):
        stage.check_request(cfg)


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
    rounds = [json.loads(line) for line in (out / "rounds.jsonl").read_text().splitlines()]
    best = min(range(len(rounds)), key=lambda r: rounds[r]["eval_cost"])  # first of equals
    assert summary["chosen_round"] == best
    assert summary["eval_cost"] == rounds[best]["eval_cost"]
    chosen = (out / f"round-{best}.safetensors").read_bytes()
    assert np.array_equal(load(chosen)["theta"], load(theta_file.read_bytes())["theta"])
    # a kill after round 0: round 1's labels and weights and the result are gone
    for name in ("theta.safetensors", "round-1.safetensors", "labels-1/0.npz"):
        (out / name).unlink()
    again = stage.distill(cfg, tmp_path / "run")
    assert hashlib.sha256(again.read_bytes()).hexdigest() == first
    (out / "round-1.safetensors").write_bytes(b"edited")
    (out / "theta.safetensors").unlink()
    with pytest.raises(PacplanError, match="has changed or is corrupted"):
        stage.distill(cfg, tmp_path / "run")


def test_the_record_names_the_engine_the_teacher_looked_ahead_in() -> None:
    from pacplan.pipeline.prior.distill_quadruped import TEACHER, teacher_name

    assert teacher_name({"physics": "mujoco"}) == TEACHER  # the name shipped priors carry
    assert teacher_name({"variant": "paper-code"}) == TEACHER  # that variant's default engine
    assert "in PyBullet" in teacher_name({})  # the text world's default engine
    assert "in PyBullet" in teacher_name({"variant": "paper-code", "physics": "bullet"})
