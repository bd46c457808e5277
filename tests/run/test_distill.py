"""The distillation stage of train-prior: refusals before any work, resume to the bit, and the
prior's metadata."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.files import safetensors_metadata
from pacplan.run import distill as stage
from pacplan.worlds.uav import distill as dl
from pacplan.worlds.uav import teacher as tch

TINY = {"envs": 6, "rounds": 1, "free_states": 4, "epochs": 1, "eval_envs": 0, "workers": 1,
        "batch": 64}


def _cfg(world: str = "uav", **distill: object) -> object:
    options = {"simulator": "batched", "compile": False} if world == "uav" else {}
    return parse_config({
        "name": "t", "world": {"name": world, "options": options},
        "seeds": {"prior": [0, 1000], "prior_eval": [300000, 300100], "cert": [100000, 100100],
                  "test": [200000, 200100]},
        "distill": {**TINY, **distill},
        "es": {"iterations": 1, "envs_per_iter": 2, "pairs_per_env": 1, "init_var": 0.001,
               "shared_perturbations": True},
        "executor": {"kind": "serial"},
    })


def test_refuses_a_world_the_teacher_does_not_support_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match="only in the uav world, not 'toy'") as exc:
        stage.distill(_cfg("toy"), tmp_path / "run")
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "run").exists()


def test_refuses_more_teacher_environments_than_prior_seeds(tmp_path: Path) -> None:
    with pytest.raises(PacplanError, match=r"distill\.envs 5000 exceeds the 1000 seeds"):
        stage.distill(_cfg(envs=5000), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_visited_states_follow_the_plan_and_stop_at_a_collision() -> None:
    lat = tch.solve([300_002])
    plan = lat.plan()
    st = dl.visited(lat.seeds, plan, lat)
    assert len(st) == 12 and list(st.step) == list(range(12))
    ix = np.cumsum(plan[0] // 5 - 2)[:-1]
    assert list(st.ix[1:]) == list(ix)
    crash = np.full((1, 12), 14)  # straight up (dz = +1 m each step): the ceiling in step 1
    st = dl.visited(lat.seeds, crash, lat)
    assert list(st.step) == [0, 1]


def test_preferences_are_the_teachers_values() -> None:
    lat = tch.solve([300_002])
    st = dl.visited(lat.seeds, lat.plan(), lat)
    pref = dl.preferences(lat, st, 0.1)
    assert (pref <= 0).all() and np.allclose(pref.max(1), 0)
    best = lat.best(np.zeros(len(st), int), st.step, st.ix, st.iz)
    assert np.allclose(pref[np.arange(len(st)), best], 0)  # the plan's primitive is a best one
    qc, ql = lat.q(np.zeros(len(st), int), st.step, st.ix, st.iz)
    j = np.argmax(qc[0])  # the worst primitive at the start: colliding costs outweigh clearance
    assert pref[0, j] == pytest.approx((-10 * (qc[0, j] - qc[0].min()) + ql[0, j] - ql[0, best[0]])
                                       / 0.1, rel=1e-5)


def test_cached_images_are_the_fresh_ones() -> None:
    from pacplan.worlds.uav.batched import BatchedSimulator

    lat = tch.solve([300_002, 300_003])
    st = dl.visited(lat.seeds, lat.plan(), lat)
    sim = BatchedSimulator()
    cache: dict = {}
    part = dl.States(st.seed[::2], st.step[::2], st.ix[::2], st.iz[::2])
    dl.render(sim, part, cache)
    assert np.array_equal(dl.render(sim, st, cache), dl.render(sim, st))


@pytest.mark.slow
def test_killed_distillation_resumes_to_the_bit_and_is_recorded(tmp_path: Path) -> None:
    from pacplan.run.training import train_prior

    cfg = _cfg()
    first = stage.distill(cfg, tmp_path / "a")
    want = first.read_bytes()
    # a run killed after round 0 (its later files gone) and with a lattice chunk lost
    out = tmp_path / "a" / stage.DIR
    for name in ("round-1.safetensors", "states-1.npy", stage.THETA, stage.RECORD):
        (out / name).unlink()
    next((out / "lattice").iterdir()).unlink()
    assert stage.distill(cfg, tmp_path / "a").read_bytes() == want
    assert stage.distill(cfg, tmp_path / "b").read_bytes() == want  # and from scratch
    record = json.loads((out / stage.RECORD).read_text())
    assert record["seeds"] == [0, 6] and [r["round"] for r in record["rounds_log"]] == [0, 1]
    train_prior(cfg, tmp_path / "a", progress=False)
    meta = safetensors_metadata((tmp_path / "a" / "prior.safetensors").read_bytes())
    assert json.loads(meta["distill"])["seeds"] == [0, 6]


def test_report_says_how_the_prior_was_taught_and_shows_the_stages(tmp_path: Path) -> None:
    from pacplan.run.report_prior import _taught
    from pacplan.run.rundir import RunDir

    meta = {"distill": json.dumps({"teacher": "T", "seeds": [0, 480], "rounds": 3,
                                   "states": 27272, "eval_cost": 0.0496, "eval_envs": 500})}
    src = tmp_path / "p.safetensors"
    src.write_bytes(b"x")
    (tmp_path / "p-stages.png").write_bytes(b"png")
    rd = RunDir(tmp_path / "run")
    text = "\n".join(_taught(meta, src, rd))
    assert "[0, 480)" in text and "3 DAgger rounds on 27,272 states" in text
    assert "4.96 % on 500" in text and "figures/prior_stages.png" in text
    assert (tmp_path / "run" / "figures" / "prior_stages.png").read_bytes() == b"png"
    assert _taught({}, src, rd) == []
    (tmp_path / "p-stages.png").unlink()  # a figure drawn into the run directory is kept
    assert "figures/prior_stages.png` in the run directory" in "\n".join(_taught(meta, src, rd))
