"""The climbing-opening teacher as `train-prior`'s distillation stage: its prior is the rule's
DAgger rounds composed by hand (the oracle: `worlds.quadruped.opening`'s functions), to the bit,
with the base prior's σ; a kill between rounds loses no finished round; bad requests are refused
in one line before any rollout."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("mujoco")

from pacplan.config import parse_config
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import load_prior, read_prior_file
from pacplan.pipeline.prior import distill as stage
from pacplan.pipeline.prior import distill_opening
from pacplan.pipeline.prior.training import train_prior
from pacplan.pipeline.rundir import RunDir
from pacplan.presets import shipped_priors
from pacplan.worlds.base import make_world, stratum_members
from pacplan.worlds.quadruped import opening

WORLD = {"variant": "paper-code", "physics": "mujoco"}
BASE = str(shipped_priors()["quadruped-paper-code-twin"])
TINY = {"steep": 1, "ordinary": 1, "eval_steep": 1, "eval_ordinary": 1, "iterations": 5}


def _raw(**distill: Any) -> dict[str, Any]:
    return {
        "name": "o", "world": {"name": "quadruped", "options": dict(WORLD)},
        "seeds": {"prior": [0, 1000], "prior_eval": [300000, 300500], "cert": [100000, 100100],
                  "test": [200000, 200100]},
        "distill": {"teacher": "quadruped-opening", "rounds": 1, "workers": 1,
                    "opening": {"base": BASE, **TINY}, **distill},
        "es": {"iterations": 0, "init_var": BASE},
        "executor": {"kind": "serial"},
    }


def _first(world: Any, lo: int, hi: int) -> tuple[list[int], list[bool]]:
    """The first steep and the first other seed of [lo, hi), as the teacher picks them."""
    seeds = np.arange(lo, hi)
    member = stratum_members(world, "steep", seeds)
    return [int(seeds[member][0]), int(seeds[~member][0])], [True, False]


def _by_hand() -> tuple[np.ndarray, np.ndarray]:
    """Round 0 (the rule walks), round 1 (round 0's student walks, the rule labels), each fit
    from the base mean on all states so far; the round whose net walks the held-out terrains
    best at the stratum's share; the base prior's log-variance."""
    world = make_world("quadruped", **WORLD)
    rule = opening.OpeningRule()
    base, logvar = load_prior(BASE)
    seeds, flags = _first(world, 0, 1000)
    held, _ = _first(world, 300000, 300500)
    share = float(stratum_members(world, "steep", np.arange(100_000)).mean())
    parts: list[opening.OpeningStates] = []
    thetas, costs = [], []
    for walker in (None, "student"):
        net = None if walker is None else thetas[-1]
        parts += [opening.walk_and_label(world, rule, base, net, s, f)[0]
                  for s, f in zip(seeds, flags, strict=True)]
        theta, _ = opening.fit(base, base, opening.OpeningStates.concat(parts),
                               opening_weight=3.0, pull=1e-4, iterations=5)
        thetas.append(theta)
        steep, other = (world.rollout(theta.astype(np.float32), s).cost for s in held)
        costs.append(share * steep + (1 - share) * other)
    world.close()
    return thetas[int(np.argmin(costs))], logvar


def test_the_prior_is_the_rounds_composed_by_hand_and_survives_a_kill(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_config(_raw())
    fits, walks = [], []
    real_fit, real_walk = opening.fit, distill_opening._walk_chunk

    def fit_then_die(*args: Any, **kw: Any) -> Any:
        fits.append(1)
        if len(fits) == 2:
            raise KeyboardInterrupt  # a kill while round 1 fits, after its walk was listed
        return real_fit(*args, **kw)

    def counted_walk(task: Any) -> str:
        walks.append(Path(task[-1]).parent.name)
        return real_walk(task)

    monkeypatch.setattr(opening, "fit", fit_then_die)
    monkeypatch.setattr(distill_opening, "_walk_chunk", counted_walk)
    with pytest.raises(KeyboardInterrupt):
        train_prior(cfg, tmp_path / "run", progress=False)
    assert walks == ["opening-0", "opening-1"]
    train_prior(cfg, tmp_path / "run", progress=False)  # resumed: no walk redone
    assert walks == ["opening-0", "opening-1"] and len(fits) == 3
    theta, logvar = _by_hand()
    mu, got_logvar = load_prior(tmp_path / "run" / RunDir.PRIOR)
    assert np.array_equal(mu, theta) and np.array_equal(got_logvar, logvar)
    prior = read_prior_file(tmp_path / "run" / RunDir.PRIOR)
    assert prior.seeds == (0, 1000) and prior.world == {"name": "quadruped", "options": WORLD}
    summary = stage.distilled_summary(tmp_path / "run" / "distill" / stage.THETA)
    assert summary["teacher"] == distill_opening.TEACHER and summary["eval_envs"] == 2
    assert summary["base_sha256"] == hashlib.sha256(Path(BASE).read_bytes()).hexdigest()
    assert (tmp_path / "run" / "distill" / "rounds.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(("change", "message"), [
    ({"distill": {"teacher": "quadruped-opening", "rounds": 1}},
     r"distill\.teacher quadruped-opening needs a distill\.opening section"),
    ({"distill": {"teacher": "quadruped-look-ahead", "opening": {"base": BASE}}},
     r"distill\.opening sets the quadruped-opening teacher; this distill section's teacher is "
     r"quadruped-look-ahead"),
    ({"distill": {"teacher": "uav-lattice", "rounds": 1}},
     r"distill\.teacher 'uav-lattice' does not teach in world 'quadruped'; its teachers: "
     r"quadruped-look-ahead, quadruped-opening"),
    ({"distill": {"teacher": "quadruped-opening", "envs": 8, "opening": {"base": BASE}}},
     r"distill\.envs is not a setting of the quadruped-opening teacher"),
    ({"distill": {"teacher": "quadruped-opening", "opening": {"base": BASE, "steep": 900}}},
     r"seeds\.prior \[0, 1000\] holds \d+ steep and \d+ other terrains; distill\.opening asks "
     r"for 900 and 300"),
    ({"seeds": {"prior": [0, 1000], "cert": [100000, 100100], "test": [200000, 200100]}},
     r"chooses its round on seeds\.prior_eval terrains; the config has none"),
    ({"distill": {"teacher": "quadruped-opening",
                  "opening": {"base": str(shipped_priors()["uav"])}}},
     r"distill\.opening\.base .*uav\.safetensors: a prior of \d+ weights, not the quadruped "
     r"net's 944"),
    ({"distill": {"teacher": "quadruped-opening",
                  "opening": {"base": str(shipped_priors()["quadruped"].parent
                                          / "quadruped-gait-best.safetensors")}}},
     r"distill\.opening\.base: .*gait-best\.safetensors: a prior needs tensors 'mu' and "
     r"'logvar'"),
])
def test_refuses_before_any_work(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    raw = _raw()
    raw.update(change)
    with pytest.raises(PacplanError, match=message) as exc:
        stage.distill(parse_config(raw), tmp_path / "run")
    assert "\n" not in str(exc.value)
    assert not (tmp_path / "run").exists()


def test_the_base_prior_counts_by_content_not_place(tmp_path: Path) -> None:
    """Moving the base prior keeps the stamp (a run resumes from another checkout); another
    base is another teaching."""
    import shutil

    moved = tmp_path / "elsewhere.safetensors"
    shutil.copyfile(BASE, moved)
    here = stage._inputs(parse_config(_raw()))
    there = _raw()
    there["distill"]["opening"]["base"] = str(moved)
    assert stage._inputs(parse_config(there)) == here
    other = _raw()
    other["distill"]["opening"]["base"] = str(shipped_priors()["quadruped"])
    assert stage._inputs(parse_config(other))["base_sha256"] != here["base_sha256"]


def test_naming_the_worlds_own_teacher_keeps_the_stamp() -> None:
    """distill.teacher spelt out as the world's default is the same teaching as leaving it out:
    a folder distilled before the field existed resumes under either config."""
    raw = _raw()
    raw["distill"] = {"envs": 2, "rounds": 1, "workers": 1}
    plain = stage._inputs(parse_config(raw))
    raw["distill"]["teacher"] = "quadruped-look-ahead"
    assert stage._inputs(parse_config(raw)) == plain
    assert "teacher" not in plain["distill"] and "opening" not in plain["distill"]


def test_the_report_says_the_taught_net_is_the_mean_refining_its_base(tmp_path: Path) -> None:
    """The climbing-opening student (its metadata as the teaching script wrote it, every round
    listed) and the stage's own summary both read as: a taught net with no ES after it,
    refining the base prior, its chosen round's states and held-out cost."""
    from pacplan.io.files import safetensors_metadata, sha256_bytes
    from pacplan.report.prior import _taught

    rd = RunDir(tmp_path / "run")
    student = shipped_priors()["quadruped-paper-code"]  # the student, as the script wrote it
    meta = safetensors_metadata(student.read_bytes())
    said = "\n".join(_taught(meta, None, rd))
    sha = sha256_bytes(Path(BASE).read_bytes())
    assert said.startswith("Its mean is a taught net, with no ES after it (metadata `distill`): "
                           "climbing opening on steep first tents")
    assert f"refining the prior with sha256 `{sha}`" in said
    assert "1 DAgger rounds on 25,322 states; the taught net's held-out cost 10.74 % on " \
           "prior_eval environments." in said
    summary = {"teacher": "T", "seeds": [0, 10], "rounds": 1, "states": 5, "eval_cost": 0.25,
               "eval_envs": 2, "chosen_round": 1, "base_sha256": "ab"}
    said = "\n".join(_taught({"distill": json.dumps(summary), "iteration": "3"}, None, rd))
    assert said.startswith("Its ES started from a taught net") and "sha256 `ab`" in said
    assert "held-out cost 25.00 % on 2 prior_eval environments" in said
    listed = {"teacher": "T", "seeds": [0, 10], "chosen_round": 5, "rounds": [{"states": 1}]}
    assert _taught({"distill": json.dumps(listed)}, None, rd) == [
        "The prior's `distill` metadata is unreadable.", ""]


def test_each_walked_chunk_is_listed_before_the_next_is_walked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kill in a round's second chunk keeps its first (listed), so a resume walks only the
    rest: the chunks were listed only once the whole round was walked."""
    raw = _raw()
    raw["distill"]["opening"].update({"steep": distill_opening.CHUNK, "ordinary": 1})
    cfg = parse_config(raw)
    real_walk, walked = distill_opening._walk_chunk, []

    def walk_once(task: Any) -> str:
        if walked:
            raise KeyboardInterrupt
        walked.append(task[3])
        return real_walk(task)

    monkeypatch.setattr(distill_opening, "_walk_chunk", walk_once)
    with pytest.raises(KeyboardInterrupt):
        stage.distill(cfg, tmp_path / "run")
    ledger = (tmp_path / "run" / "distill" / "ledger.jsonl").read_text()
    assert len(walked[0]) == distill_opening.CHUNK
    assert f'"opening-0/{walked[0][0]}.npz"' in ledger


def test_the_shipped_recipe_passes_every_check_before_any_rollout() -> None:
    """quadruped-paper-code-prior names a base prior that exists and is the quadruped
    net's, terrains enough of each kind, and seeds the teacher may see."""
    pytest.importorskip("pybullet")
    from pacplan.config import load_config
    from pacplan.presets import resolve_config

    cfg = load_config(resolve_config("quadruped-paper-code-prior"))
    stage.check_request(cfg)
    assert Path(cfg.distill.opening.base) == Path(BASE)  # the twin-trained paper-code prior
    assert cfg.es.iterations == 0 and Path(cfg.es.init_var) == Path(BASE)  # its σ kept
