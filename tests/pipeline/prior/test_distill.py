"""The distillation stage of train-prior: refusals before any work, resume to the bit, and the
prior's metadata."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import cli
from pacplan.config import dump_config, parse_config
from pacplan.errors import PacplanError
from pacplan.io.files import safetensors_metadata, save_safetensors
from pacplan.pipeline.prior import distill as stage
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
    with pytest.raises(PacplanError, match="only in the quadruped, uav worlds, not 'toy'") as exc:
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
    from pacplan.pipeline.prior.training import train_prior

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
    from pacplan.pipeline.rundir import RunDir
    from pacplan.report.prior import _taught

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


# Checkpoints are trusted only as far as the run's ledger vouches for them: what a kill leaves
# is recomputed to the same bytes, what only an edit makes is refused, naming the file.


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory whose distillation finished uninterrupted (TINY: one lattice file,
    rounds 0 and 1); tests damage copies of it."""
    run = tmp_path_factory.mktemp("distill") / "run"
    stage.distill(_cfg(), run)
    return run


def _copy(finished: Path, tmp_path: Path, *drop: str) -> Path:
    """A copy of the finished run with the files of `drop` gone from its distill/ folder."""
    run = tmp_path / "run"
    shutil.copytree(finished, run)
    for name in drop:
        (run / stage.DIR / name).unlink()
    return run


_AFTER_ROUND_0 = ("round-1.safetensors", "states-1.npy", stage.THETA)
"""What a run killed after round 0 lacks."""


def _refused(run: Path, name: str) -> str:
    with pytest.raises(PacplanError) as exc:
        stage.distill(_cfg(), run)
    message = str(exc.value)
    assert "\n" not in message and str(run / stage.DIR / name) in message, message
    assert "delete it to recompute it" in message
    return message


def _rewrite_theta(path: Path, change: object) -> None:
    from safetensors.numpy import load_file

    theta = load_file(str(path))["theta"]
    save_safetensors(path, {"theta": change(theta)},  # type: ignore[operator]
                     safetensors_metadata(path.read_bytes()))


def test_an_edited_lattice_file_is_refused_naming_it(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path, *_AFTER_ROUND_0)
    path = run / stage.DIR / "lattice" / "0.npz"
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["q_cost"] = arrays["q_cost"] + 1  # the teacher's values moved
    np.savez(path, **arrays)
    _refused(run, "lattice/0.npz")
    assert not (run / stage.DIR / stage.THETA).exists()


def test_a_scaled_round_file_is_refused_naming_it(finished: Path, tmp_path: Path) -> None:
    run = _copy(finished, tmp_path, *_AFTER_ROUND_0)
    _rewrite_theta(run / stage.DIR / "round-0.safetensors", lambda t: t * 2)
    _refused(run, "round-0.safetensors")
    assert not (run / stage.DIR / stage.THETA).exists()


def test_a_zeroed_distilled_theta_is_refused_in_one_line_by_train_prior(
        finished: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _copy(finished, tmp_path)
    _rewrite_theta(run / stage.DIR / stage.THETA, np.zeros_like)
    _refused(run, stage.THETA)
    config = tmp_path / "distill.yaml"
    dump_config(_cfg(), config)
    code, _, err = cli(["train-prior", str(config), "--out", str(run), "--quiet"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and stage.THETA in err, err
    assert not (run / "prior.safetensors").exists()  # ES never started from the zeros


def test_a_forged_ledger_never_unpickles_a_lattice_file(finished: Path, tmp_path: Path) -> None:
    """Even a file the ledger vouches for is read without pickle: an object array is refused."""
    run = _copy(finished, tmp_path, *_AFTER_ROUND_0)
    path = run / stage.DIR / "lattice" / "0.npz"
    np.savez(path, seeds=np.array([object()], dtype=object))
    ledger = run / stage.DIR / "ledger.jsonl"
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    with ledger.open("a") as fh:
        fh.write(json.dumps({"file": "lattice/0.npz", "sha256": sha}) + "\n")
    assert "unreadable lattice file" in _refused(run, "lattice/0.npz")


def test_other_distillation_settings_are_refused_not_reused(finished: Path,
                                                            tmp_path: Path) -> None:
    run = _copy(finished, tmp_path)
    with pytest.raises(PacplanError, match=r"distilled with other settings \(changed: "
                       r"distill\.epochs\); use a new --out directory"):
        stage.distill(_cfg(epochs=2), run)
    stage.distill(_cfg(workers=3), run)  # where it runs is no setting of the result


def test_a_torn_last_line_of_the_rounds_log_resumes_to_the_same_prior(finished: Path,
                                                                      tmp_path: Path) -> None:
    """Killed while round 1 appended its log line: round 1 is rerun, the torn line dropped."""
    run = _copy(finished, tmp_path, "round-1.safetensors", stage.THETA)
    log = run / stage.DIR / stage.LOG
    lines = log.read_text().splitlines()
    assert len(lines) == 2
    log.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    theta = stage.distill(_cfg(), run)
    assert theta.read_bytes() == (finished / stage.DIR / stage.THETA).read_bytes()
    rounds = [json.loads(line)["round"] for line in log.read_text().splitlines()]
    assert rounds == [0, 1]
    record = json.loads((run / stage.DIR / stage.RECORD).read_text())
    assert [r["round"] for r in record["rounds_log"]] == [0, 1]


def test_a_truncated_unlisted_lattice_file_is_recomputed_to_the_same_prior(
        finished: Path, tmp_path: Path) -> None:
    """Killed while the teacher wrote its lattice (by a writer that is not atomic, or before
    the file was listed): the half file is solved again, to the same bytes."""
    run = _copy(finished, tmp_path)
    for path in (run / stage.DIR).rglob("*"):
        if path.is_file() and path.name != "inputs.json":  # the folder's stamp is first
            path.unlink()
    whole = (finished / stage.DIR / "lattice" / "0.npz").read_bytes()
    (run / stage.DIR / "lattice" / "0.npz").write_bytes(whole[: len(whole) // 2])
    theta = stage.distill(_cfg(), run)
    assert theta.read_bytes() == (finished / stage.DIR / stage.THETA).read_bytes()
    assert (run / stage.DIR / "lattice" / "0.npz").read_bytes() == whole


def test_a_file_whose_ledger_line_a_kill_cut_off_is_recomputed(finished: Path,
                                                               tmp_path: Path) -> None:
    """θ written, its ledger line cut short: written again (same bytes), listed again."""
    run = _copy(finished, tmp_path)
    ledger = run / stage.DIR / "ledger.jsonl"
    text = ledger.read_text()
    assert json.loads(text.splitlines()[-1])["file"] == stage.THETA
    ledger.write_text(text[: len(text) - 20])
    (run / stage.DIR / stage.THETA).write_bytes(b"half a file")
    theta = stage.distill(_cfg(), run)
    assert theta.read_bytes() == (finished / stage.DIR / stage.THETA).read_bytes()
    assert json.loads(ledger.read_text().splitlines()[-1])["file"] == stage.THETA
