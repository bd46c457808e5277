"""`variant: paper-code`: the paper's code's terrain, clock, options and cost, and the text world
left as it was.

Oracles: the box geometry is recomputed here from the facts of the paper's code (a rotated
rectangle per box from its centre, half extents and Euler pitch, cut by vertical lines), not
from `boxes`' tent formulas; the gait clock from its definition (control step c holds the gait
at phase ω · 2 · 0.01 · c); the text world against results/quadruped's stored test matrix.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds import make_world
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.boxes import BoxTerrain, box_poses, sample_box_terrain
from pacplan.worlds.quadruped.gait import GaitParams, gait_motor_angles
from pacplan.worlds.quadruped.paper_code import paper_code_cost, wrap_angles
from pacplan.worlds.quadruped.paper_code_mujoco import PaperCodeMujocoSim
from pacplan.worlds.quadruped.policy import gait_theta

RUN = Path(__file__).resolve().parents[3] / "results" / "quadruped"


def _profile_from_boxes(seed: int, xs: np.ndarray) -> np.ndarray:
    """Top of the union of the code's boxes (and the plane z = 0) at each x, from the boxes'
    corners: l = 0.5, half extents (l/2, ·, l/2), pair k at x = 0.5 + 0.5k, z = −h, pitches ∓θ."""
    rs = np.random.RandomState(seed)
    l = 0.5  # noqa: E741
    tops = np.zeros_like(xs)
    for k in range(25):
        theta = float(rs.rand(1)[0]) * math.radians(35.0) * 2.0 / 3.0
        h = l * math.sin(math.pi / 4 - theta) / math.sqrt(2.0)
        d = math.sqrt(2.0) * l * math.cos(math.pi / 4 + theta)
        x0 = 0.5 + 0.5 * k
        for cx, pitch in ((x0, -theta), (x0 + d, theta)):
            # rotation about y by `pitch`: (x, z) -> (x cos p + z sin p, −x sin p + z cos p)
            c, s = math.cos(pitch), math.sin(pitch)
            corners = [(cx + a * c + b * s, -h - a * s + b * c)
                       for a, b in ((-l / 2, -l / 2), (l / 2, -l / 2), (l / 2, l / 2),
                                    (-l / 2, l / 2))]
            for i, x in enumerate(xs):  # highest crossing of the vertical line x with the edges
                for (xa, za), (xb, zb) in zip(corners, corners[1:] + corners[:1], strict=True):
                    if min(xa, xb) <= x <= max(xa, xb) and xa != xb:
                        z = za + (zb - za) * (x - xa) / (xb - xa)
                        tops[i] = max(tops[i], z)
    return tops


@pytest.mark.parametrize("seed", [0, 7, 123_456])
def test_box_profile_matches_the_boxes_of_the_code(seed: int) -> None:
    xs = np.array([0.1, 0.3, 0.55, 0.8, 1.234, 2.0, 3.71, 5.05, 6.0, 9.9, 12.6])
    terrain = sample_box_terrain(seed)
    np.testing.assert_allclose(terrain.height(xs), _profile_from_boxes(seed, xs), atol=1e-12)
    # the crests are where the two boxes of a pair meet, at l·sin θ (unless a neighbour buries it)
    crest = _profile_from_boxes(seed, terrain.crest_x)
    assert (crest >= terrain.peak_heights - 1e-12).all()
    visible = np.isin(terrain.crest_x, terrain.visible_crests(x_max=20.0))
    np.testing.assert_allclose(crest[visible], 0.5 * np.sin(terrain.thetas[visible]), atol=1e-12)
    assert visible.sum() >= 15


def test_box_terrain_has_about_19_visible_crests_per_10_m_and_never_touches_ground() -> None:
    crests, valleys = [], []
    for seed in range(300):
        t = sample_box_terrain(seed)
        crests.append(t.visible_crests(6.5).size)
        xs = np.linspace(1.0, 6.5, 1101)
        valleys.append(float(t.height(xs).min()))
    per_metre = np.mean(crests) / 6.0  # crests lie from x ≈ 0.6 m on
    assert 1.8 < per_metre < 2.0  # the notes measured 1.88 (the text world: 1.00)
    assert np.mean(valleys) > 0.0


def test_box_terrain_is_seeded_and_checked() -> None:
    a, b = sample_box_terrain(42), sample_box_terrain(42)
    assert np.array_equal(a.thetas, b.thetas)
    assert not np.array_equal(a.thetas, sample_box_terrain(43).thetas)
    # the code's draws: one U[0, 1) per pair from the legacy generator, times 35° · 2/3
    expected = np.random.RandomState(42).random_sample(25) * math.radians(70.0 / 3.0)
    assert np.array_equal(a.thetas, expected)
    assert float(np.degrees(a.thetas).max()) < 70.0 / 3.0
    for bad in (-1, 2**32):
        with pytest.raises(PacplanError, match="seeds in"):
            sample_box_terrain(bad)


def test_mujoco_boxes_are_where_the_code_put_them() -> None:
    """Rays cast straight down in the compiled model meet the profile of `boxes`."""
    mujoco = pytest.importorskip("mujoco")
    sim = PaperCodeMujocoSim()
    terrain = sample_box_terrain(5)
    sim.reset(terrain)
    m, d = sim.model, sim.data
    pos, quat = box_poses(terrain)
    np.testing.assert_array_equal(m.body_pos[sim._plank_bodies], pos)
    np.testing.assert_array_equal(d.mocap_quat, quat)
    geom = np.zeros(1, dtype=np.int32)
    for x in (0.9, 1.6, 3.3, 4.75, 7.0):
        y = 2.0  # beside the robot
        dist = mujoco.mj_ray(m, d, np.array([x, y, 2.0]), np.array([0.0, 0.0, -1.0]), None, 1,
                             -1, geom)
        assert 2.0 - dist == pytest.approx(float(terrain.height(x)), abs=1e-9)
    # the goal marker is seen (a ray at its height hits x = 6 − 0.05) but never touched
    dist = mujoco.mj_ray(m, d, np.array([5.0, 4.0, 0.14]), np.array([1.0, 0.0, 0.0]), None, 1,
                         -1, geom)
    assert dist == pytest.approx(0.95) or float(terrain.height(5.0 + dist)) >= 0.14 - 1e-9
    marker = m.geom("goal_marker")
    assert marker.contype[0] == 0 and marker.conaffinity[0] == 0
    # a foot grips the code's boxes with Bullet's default 0.5 (its URDF friction 1 times the
    # boxes' 0.5), the plane with 1; the boxes' priority makes MuJoCo use theirs
    box, ground = m.geom("plank7"), m.geom("ground")
    assert box.friction[0] == 0.5 and box.priority[0] == 2 and ground.friction[0] == 1.0
    assert tuple(box.solref) == sim.contact.foot_solref
    # the sky reads what the code's float32 arithmetic made of the cleared depth buffer
    sky = np.float32(1000.0 * 0.01) / (np.float32(1000.0) - np.float32(1000.0 - 0.01)
                                        * np.float32(1.0))
    assert sim.depth_image().max() == sky and 999.0 < sky < 999.1


def test_gait_clock_runs_at_twice_simulated_time_held_per_control_step() -> None:
    sim = PaperCodeMujocoSim()
    gait = GaitParams(a1=0.6, a2=0.9, a_st=0.1, omega=33.0)
    n = 125  # a 0.25 s primitive: 25 control steps of 5 physics steps
    for start in (0, 125, 250):
        sim.step_count = start
        targets, phases = sim._gait_targets(gait, n)
        k = np.arange(n)
        t_sim = 0.01 * ((start + k) // 5)  # simulated time at the start of each control step
        np.testing.assert_allclose(phases, gait.omega * 2.0 * t_sim, rtol=0, atol=1e-12)
        assert np.array_equal(targets, gait_motor_angles(gait, phases))
        assert np.array_equal(targets[0::5], targets[4::5])  # held for the 5 physics steps
    # a whole primitive advances the clock by 125 steps and stops on the control-step grid
    world = QuadrupedWorld(variant="paper-code")
    result = world.rollout(gait_theta(GaitParams(0.8, 1.0, 0.0, 40.0)), 3)
    assert result.primitives <= 20
    assert world.sim.step_count % 5 == 0
    assert result.sim_time <= 5.0 + 1e-9


def test_paper_code_cost_rule() -> None:
    assert paper_code_cost(3.0, 6.0, False) == (0.5, 0.5)
    assert paper_code_cost(6.3, 6.0, True) == (0.0, 0.0)
    assert paper_code_cost(-0.6, 6.0, False) == (1.0, pytest.approx(1.1))  # the clip binds
    world = QuadrupedWorld(variant="paper-code")
    r = world.rollout(np.zeros(944, np.float32), 11)
    # the cost reads x at the start of the last primitive that ran, in the world frame
    expected = 0.0 if r.finished else min(1.0, abs(r.x_at_primitive_start[-1] - 6.0) / 6.0)
    assert r.cost == expected
    assert len(r.x_at_primitive_start) == r.primitives


def test_motor_angles_are_wrapped_as_pybullet_envs_reads_them() -> None:
    a = np.array([0.0, 3.0, math.pi, 3.5, -3.5, -math.pi, 7.0, -7.0])
    w = wrap_angles(a)
    assert ((w >= -math.pi) & (w < math.pi)).all()
    np.testing.assert_allclose(np.cos(w), np.cos(a), atol=1e-12)
    assert w[2] == -math.pi and w[1] == 3.0


@pytest.mark.parametrize(("options", "named"), [
    ({"variant": "paper-code", "plank_lenght": 0.5}, "plank_lenght"),
    ({"variant": "paper-code", "plank_length": 0.5}, "plank_length"),
    ({"variant": "paper-code", "physics": "tiny"}, "physics"),
    ({"variant": "paper-code", "robot": "minitaur"}, "robot"),
    ({"variant": "paper-code", "gait_clock": -1.0}, "gait_clock"),
    ({"variant": "paper-code", "primitive_s": 0.013}, "primitive_s"),
    ({"variant": "paper-code", "max_slope_deg": 50.0}, "max_slope_deg"),
    ({"variant": "paper-code", "horizon_s": "5"}, "horizon_s"),
    ({"variant": "papercode"}, "variant"),
    ({"gait_clock": 2.0}, "gait_clock"),
])
def test_options_are_refused_in_one_line_naming_them(options: dict, named: str) -> None:
    with pytest.raises(PacplanError) as err:
        make_world("quadruped", **options)
    text = str(err.value)
    assert "\n" not in text and named in text


def test_paper_code_defaults() -> None:
    w = QuadrupedWorld(variant="paper-code")
    assert w.engine == "mujoco" and w.robot == "derpy"
    assert (w.rollout_config.primitive_s, w.rollout_config.horizon_s) == (0.25, 5.0)
    assert w.rollout_config.max_primitives == 20
    assert w.camera.far_m == 1000.0 and w.gait_clock == 2.0
    assert isinstance(w.terrain(0), BoxTerrain)


def test_text_world_is_built_as_before() -> None:
    w = QuadrupedWorld()
    assert (w.variant, w.engine, w.max_slope_deg, w.plank_length) == ("text", "bullet", 23.3, 0.5)
    assert (w.rollout_config.primitive_s, w.rollout_config.horizon_s) == (0.5, 10.0)
    assert w.camera.far_m == 10.0 and w.gait_clock is None


def test_text_world_costs_are_the_stored_ones() -> None:
    """One cell of results/quadruped's test matrix, recomputed bit for bit."""
    world = make_world("quadruped", robot="derpy", physics="mujoco", max_slope_deg=23.3)
    policies = np.load(RUN / "policies.npy", allow_pickle=False)
    stored = np.load(RUN / "costs" / "test.npy", allow_pickle=False)
    cost = world.costs(policies[[3]].astype(np.float32), np.array([200_001]))
    assert cost.tobytes() == stored[1:2, [3]].tobytes()


def test_what_knows_only_the_text_world_refuses_the_paper_code_variant() -> None:
    from pacplan.worlds.quadruped.gym_env import MinitaurTerrainEnv
    from pacplan.worlds.quadruped.teacher import check_teacher_world

    with pytest.raises(PacplanError, match="variant 'paper-code'") as err:
        MinitaurTerrainEnv(variant="paper-code")
    assert "\n" not in str(err.value)
    check_teacher_world("quadruped", {"variant": "paper-code", "physics": "mujoco"})  # taught


def test_the_report_figure_draws_a_paper_code_walk(tmp_path: Path) -> None:
    from pacplan.worlds.quadruped.render import render_figure

    out = render_figure(4, str(tmp_path / "walk.png"), None, {"variant": "paper-code"})
    assert Path(out).stat().st_size > 10_000


def test_pybullet_builds_the_same_boxes_with_the_codes_friction() -> None:
    import pybullet

    from pacplan.worlds.quadruped.paper_code_bullet import PaperCodeBulletSim

    sim = PaperCodeBulletSim()
    terrain = sample_box_terrain(5)
    sim.reset(terrain)
    cid = sim.cid
    for x in (0.9, 1.6, 3.3, 4.75, 7.0):
        hit = pybullet.rayTest([x, 2.0, 2.0], [x, 2.0, -1.0], physicsClientId=cid)[0]
        assert hit[3][2] == pytest.approx(float(terrain.height(x)), abs=1e-6)
    plane, box = sim.terrain_body, sim.terrain_body + 1
    assert pybullet.getDynamicsInfo(plane, -1, physicsClientId=cid)[1] == 1.0
    assert pybullet.getDynamicsInfo(box, -1, physicsClientId=cid)[1] == 0.5
    sky = np.float32(1000.0 * 0.01) / (np.float32(1000.0) - np.float32(1000.0 - 0.01)
                                        * np.float32(1.0))
    assert sim.depth_image().max() == sky
    assert sim.step_count == 0 and sim.time == 0.0
    sim.close()
    world = QuadrupedWorld(variant="paper-code", physics="bullet")
    assert world.engine == "bullet" and world.rollout_config.primitive_s == 0.25


def test_the_papers_draws_are_drawn_as_its_code_drew_them() -> None:
    torch = pytest.importorskip("torch")
    from pacplan.io.paperdata import paper_data_dir
    from pacplan.worlds.quadruped.paper_prior import from_paper_layout, paper_draws

    folder = paper_data_dir()
    if folder is None:
        pytest.skip("the paper's data is not here (pacplan data paper)")
    ten = paper_draws(folder, 10)
    assert ten.shape == (10, 944) and ten.dtype == np.float32
    assert np.array_equal(paper_draws(folder, 50)[:10], ten)  # a (50, 944) block starts alike
    torch.manual_seed(0)  # the paper's code: torch.manual_seed(0); randn((m, 944))
    eps = torch.randn((10, 944)).numpy()
    mu = np.load(folder / "mu_minitaur_best.npy").astype(np.float32)
    std = np.exp(0.5 * np.load(folder / "logvar_minitaur_best.npy").astype(np.float32))
    np.testing.assert_allclose(ten, from_paper_layout(mu + std * eps), rtol=1e-6, atol=1e-6)
