"""benchmarks/quadruped_steep_stall.py: held-out steep terrains only, a stall told from a fall
or a finish, and one JSON object per call (one terrain in MuJoCo)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import load_script
from pacplan.presets import resolve_prior
from pacplan.worlds.quadruped import QuadrupedWorld

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "quadruped_steep_stall.py"


def test_terrains_are_steep_and_held_out() -> None:
    bench = load_script(SCRIPT)
    world = QuadrupedWorld(variant="paper-code")
    seeds = bench.steep_seeds(world, 300_000, 30)
    assert len(seeds) == 30 and all(300_000 <= s < 300_500 for s in seeds)
    assert all(world.terrain(s).slopes_deg[0] >= 20.0 for s in seeds)
    bench.check_held_out(seeds)  # seeds.prior_eval: allowed
    with pytest.raises(SystemExit, match=r"overlap .* test seeds \[200000, "):
        bench.check_held_out(bench.steep_seeds(world, 200_000, 3))


def test_a_stall_is_a_timeout_before_the_first_tent() -> None:
    bench = load_script(SCRIPT)
    row = {"fell": False, "finished": False, "cost": 0.9}
    assert bench.is_stall(row)
    assert not bench.is_stall(row | {"fell": True})
    assert not bench.is_stall(row | {"cost": 0.5})  # timed out further on


def test_one_terrain_gives_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("mujoco")
    bench = load_script(SCRIPT)
    prior = str(resolve_prior("quadruped-paper-code"))
    bench.main(["--prior", prior, "--terrains", "1", "--physics", "mujoco"])
    out = json.loads(capsys.readouterr().out)
    got = out["priors"][prior]
    assert got["rollouts"] == 1 and len(out["seeds"]) == 1
    assert got["stall_share"] + got["fall_share"] + got["finish_share"] <= 1.0
    assert got["timeout_share"] >= got["stall_share"]
