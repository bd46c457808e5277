"""The MuJoCo engine of the quadruped world: the generated model, the simulator and the world
option `physics="mujoco"`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

mujoco = pytest.importorskip("mujoco")

from pacplan.errors import PacplanError  # noqa: E402
from pacplan.worlds.quadruped import QuadrupedWorld, episode  # noqa: E402
from pacplan.worlds.quadruped.episode import RolloutConfig  # noqa: E402
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT  # noqa: E402
from pacplan.worlds.quadruped.mjcf import (  # noqa: E402
    FOOT_SOLIMP,
    FOOT_SOLREF,
    MjcfConfig,
    MujocoContact,
    bullet_inertials,
    bullet_mounted_pairs,
    minitaur_mjcf,
    plank_poses,
    urdf_path,
)
from pacplan.worlds.quadruped.mujoco_sim import MujocoMinitaurSim  # noqa: E402
from pacplan.worlds.quadruped.policy import POLICY_DIM  # noqa: E402
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout  # noqa: E402
from pacplan.worlds.quadruped.sim import MinitaurSim  # noqa: E402
from pacplan.worlds.quadruped.terrain import sample_terrain  # noqa: E402


@pytest.fixture(scope="module")
def sim() -> Iterator[MujocoMinitaurSim]:
    s = MujocoMinitaurSim()
    yield s
    s.close()


def _model(terrain_seed: int | None = None) -> mujoco.MjModel:
    terrain = None if terrain_seed is None else sample_terrain(terrain_seed)
    return mujoco.MjModel.from_xml_string(minitaur_mjcf(MjcfConfig(), terrain))


def test_mjcf_is_deterministic_with_a_free_base_pins_and_servos() -> None:
    assert minitaur_mjcf() == minitaur_mjcf()
    m = _model()
    base = m.body("base_chassis_link")
    assert m.jnt_type[m.body_jntadr[base.id]] == mujoco.mjtJoint.mjJNT_FREE
    assert m.nbody - 1 - m.nmocap == 27  # the URDF's 27 links
    assert m.nu == 8 and m.neq == 4
    assert all(m.eq_type[i] == mujoco.mjtEq.mjEQ_CONNECT for i in range(m.neq))
    np.testing.assert_allclose(m.actuator_gainprm[:, 0], 8.0)
    np.testing.assert_allclose(m.actuator_biasprm[:, 2], -0.3)


def test_masses_and_inertias_equal_pybullets() -> None:
    m = _model()
    inertials = bullet_inertials(urdf_path())
    assert len(inertials) == 27
    for name, (mass, _, _, inertia) in inertials.items():
        body = m.body(name)
        assert abs(m.body_mass[body.id] - mass) < 1e-9, name
        np.testing.assert_allclose(m.body_inertia[body.id], inertia, rtol=0, atol=1e-9)
    total = sum(v[0] for v in inertials.values())
    assert m.body_subtreemass[m.body("base_chassis_link").id] == pytest.approx(total, abs=1e-9)


def test_calibrated_foot_contact_and_optional_mounted_pairs() -> None:
    """The feet carry the calibrated solref/solimp; by default no mounted pair is added, and
    `mounted=True` adds Bullet's mounted link pairs as explicit contacts between their geoms."""
    m = _model()
    foot = m.geom("lower_leg_front_leftL_link_0").id
    np.testing.assert_allclose(m.geom_solref[foot], FOOT_SOLREF)
    np.testing.assert_allclose(m.geom_solimp[foot][:3], FOOT_SOLIMP)
    assert m.npair == 0
    pairs = bullet_mounted_pairs(urdf_path())
    assert len(pairs) == 5 and ("chassis_left", "upper_leg_back_leftR_link") in pairs
    mounted = mujoco.MjModel.from_xml_string(
        minitaur_mjcf(MjcfConfig(contact=MujocoContact(mounted=True, mounted_gap=0.001))))
    linked = {tuple(sorted((mounted.body(mounted.geom_bodyid[mounted.pair_geom1[i]]).name,
                            mounted.body(mounted.geom_bodyid[mounted.pair_geom2[i]]).name)))
              for i in range(mounted.npair)}
    assert linked == set(pairs)
    np.testing.assert_allclose(mounted.pair_gap, 0.001)
    np.testing.assert_allclose(mounted.pair_friction[:, :2], 0.25)  # Bullet's 0.5 × 0.5


def test_planks_reproduce_the_terrain_profile(sim: MujocoMinitaurSim) -> None:
    terrain = sample_terrain(5, 35.0)
    sim.reset(terrain)
    m, d = sim.model, sim.data
    xs = np.linspace(-0.3, 11.0, 227)
    geom = np.zeros(1, np.int32)
    dist = np.zeros(1)
    heights = []
    for x in xs:
        mujoco.mj_multiRay(m, d, np.array([x, 3.0, 5.0]), np.array([0.0, 0.0, -1.0]), None, 1,
                           -1, geom, dist, None, 1, 10.0)
        heights.append(5.0 - dist[0])
    np.testing.assert_allclose(heights, terrain.height(xs), atol=1e-9)


def test_moving_the_plank_pool_equals_compiling_the_terrain_in() -> None:
    """The pool (planks moved per terrain) simulates exactly what a model compiled for the
    terrain simulates."""
    terrain = sample_terrain(7)
    pooled = MujocoMinitaurSim()
    pooled.reset(sample_terrain(1))  # a different terrain first
    pooled.reset(terrain)
    compiled = MujocoMinitaurSim()
    compiled.reset(terrain)
    m = mujoco.MjModel.from_xml_string(minitaur_mjcf(MjcfConfig(), terrain))
    pos, quat = plank_poses(terrain)
    np.testing.assert_array_equal(m.body_pos[-len(pos):], pos)
    np.testing.assert_allclose(m.body_quat[-len(pos):], quat, atol=1e-15)
    a = pooled.run_primitive(REFERENCE_GAIT, 0.5)
    b = compiled.run_primitive(REFERENCE_GAIT, 0.5)
    assert a.steps == b.steps == 250
    np.testing.assert_array_equal(pooled.proprioception(), compiled.proprioception())


def test_settles_like_pybullet(sim: MujocoMinitaurSim) -> None:
    sim.reset(sample_terrain(0, 0.0))
    pos, _ = sim.torso_pose()
    assert pos[2] == pytest.approx(0.201, abs=0.01)  # PyBullet settles the torso at 0.201 m
    q, _ = sim.motor_state()
    assert np.all((q > 1.8) & (q < 1.92))  # PyBullet: 1.85-1.87 rad
    assert sim.time == 0.0 and sim.proprioception().shape == (22,)


def test_knee_pins_hold_while_walking(sim: MujocoMinitaurSim) -> None:
    sim.reset(sample_terrain(2))
    m, d = sim.model, sim.data
    worst = 0.0
    for _ in range(4):
        sim.run_primitive(REFERENCE_GAIT, 0.5)
        mujoco.mj_kinematics(m, d)
        for leg in ("front_left", "back_left", "front_right", "back_right"):
            gap = d.site(f"pin_{leg}R").xpos - d.site(f"pin_{leg}L").xpos
            worst = max(worst, float(np.linalg.norm(gap)))
    assert worst < 1e-3


def test_same_seed_same_cost_and_costs_in_unit_interval() -> None:
    world = QuadrupedWorld(physics="mujoco")
    thetas = np.random.default_rng(0).normal(0.0, 0.1, (2, POLICY_DIM)).astype(np.float32)
    a = world.costs(thetas, np.array([3, 4]))
    b = world.costs(thetas, np.array([3, 4]))
    np.testing.assert_array_equal(a, b)
    assert a.shape == (2, 2) and np.all((a >= 0) & (a <= 1))


def test_a_fall_ends_the_rollout(sim: MujocoMinitaurSim) -> None:
    config = RolloutConfig()
    state = episode.initial(sim, sample_terrain(0, 0.0))
    sim.data.qpos[3:7] = (np.cos(1.2), np.sin(1.2), 0.0, 0.0)  # roll the torso by 138°
    state, out = episode.transition(sim, state, REFERENCE_GAIT, config)
    assert out.fell and out.steps == sim.physics.check_every  # stopped at the first check
    assert state.fell and episode.terminated(state) and episode.done(state, config)
    assert sim.is_fallen() and sim.time == pytest.approx(out.steps * 0.002)
    assert 0.0 <= episode.cost(state, config) <= 1.0


def test_depth_is_zdepth_of_the_ground_in_front(sim: MujocoMinitaurSim) -> None:
    sim.reset(sample_terrain(0, 0.0))
    depth = sim.depth_image()
    assert depth.shape == (50, 50) and depth.dtype == np.float32
    assert np.all(depth[:20] == sim.camera.far_m)  # sky above the horizon
    eye, _ = sim.camera_frame()
    # row 30's rays dip below the axis by tan(45°)·(2·31/50 − 1) = 0.24 (PyBullet's sampling)
    # plus the 0.05 pitch: flat ground at the camera's height h is met at z-depth ≈ h / 0.29
    expected = eye[2] / ((2 * 31 / 50 - 1) + 0.05)
    assert depth[30, 25] == pytest.approx(expected, rel=0.02)


def test_depth_matches_pybullet_on_the_same_scene(sim: MujocoMinitaurSim) -> None:
    terrain = sample_terrain(11)
    sim.reset(terrain)
    bullet = MinitaurSim()
    try:
        bullet.reset(terrain)
        ours = sim.depth_image()
        # the same camera pose, so both engines see the same scene from the same place
        pos, orn = sim.torso_pose()
        from pacplan.worlds.quadruped.camera import render_depth

        theirs = render_depth(bullet.cid, pos, orn, sim.camera)
    finally:
        bullet.close()
    close = np.abs(ours - theirs) < 0.05
    assert close.mean() > 0.85, close.mean()  # the rest: the legs (meshes there, boxes here)
    view = slice(0, 33)  # sky and terrain ahead, above the robot's own legs
    assert close[view].mean() > 0.99
    assert np.median(np.abs(ours[view] - theirs[view])) < 0.01
    assert (ours[view] < 10.0).sum() > 300  # and the terrain is in view


def test_sky_ray_shortcut_gives_the_same_image(sim: MujocoMinitaurSim) -> None:
    """Rays that cannot meet the terrain (or anything) are skipped or cast against the robot
    alone: the image is bit for bit the full cast's, while walking and at 35° too."""
    shortcuts = skipped = 0
    for seed, slope in ((4, 23.3), (8, 35.0)):
        sim.reset(sample_terrain(seed, slope))
        for _ in range(8):
            eye, _ = sim.camera_frame()
            shortcuts += eye[2] > sim._terrain_top
            skipped += eye[2] > max(sim._terrain_top, sim._robot_top())
            fast = sim.depth_image()
            sim.ray_shortcuts = False
            try:
                np.testing.assert_array_equal(fast, sim.depth_image())
            finally:
                sim.ray_shortcuts = True
            if sim.run_primitive(REFERENCE_GAIT, 0.5).fell:
                break
    assert shortcuts >= 4 and skipped >= 4  # both shortcuts were taken, not only the full cast


def test_options_are_checked() -> None:
    with pytest.raises(PacplanError, match="physics"):
        QuadrupedWorld(physics="ode")
    with pytest.raises(PacplanError, match="threads"):
        QuadrupedWorld(physics="mujoco", threads=0)
    with pytest.raises(PacplanError, match="GIL"):
        QuadrupedWorld(threads=2)
    with pytest.raises(PacplanError, match="mounted_contacts"):
        QuadrupedWorld(physics="mujoco", mounted_contacts=False)
    with pytest.raises(PacplanError, match="45"):
        QuadrupedWorld(physics="mujoco", max_slope_deg=60.0)
    with pytest.raises(PacplanError, match="planks"):
        minitaur_mjcf(MjcfConfig(plank_length=0.25), sample_terrain(0))


@pytest.mark.slow
def test_thread_count_does_not_change_costs() -> None:
    thetas = np.random.default_rng(1).normal(0.0, 0.1, (2, POLICY_DIM)).astype(np.float32)
    seeds = np.arange(20, 25)
    one = QuadrupedWorld(physics="mujoco").costs(thetas, seeds)
    two = QuadrupedWorld(physics="mujoco", threads=2).costs(thetas, seeds)
    three = QuadrupedWorld(physics="mujoco", threads=3).costs(thetas, seeds)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, three)


@pytest.mark.slow
def test_reference_gait_walks_like_bullet_in_distribution(sim: MujocoMinitaurSim) -> None:
    """Issue 12's figures on seeds 0-19: Bullet 4.40 ± 1.89 m, 8 falls, mean cost 0.30; flat
    ground 10.12 m."""
    gait = fixed_gait_controller(REFERENCE_GAIT)
    rs = [rollout(sim, sample_terrain(s), gait, needs_depth=False) for s in range(20)]
    assert np.mean([r.cost for r in rs]) == pytest.approx(0.30, abs=0.06)
    assert sum(r.fell for r in rs) <= 10
    flat = rollout(sim, sample_terrain(0, 0.0), gait, RolloutConfig(finish_dx=1e6),
                   needs_depth=False)
    assert flat.dx == pytest.approx(10.12, rel=0.05) and not flat.fell


def test_render_cli_passes_world_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """`pacplan render quadruped --option physics=mujoco` walks in MuJoCo; a misspelt option
    is refused (exit 2, one line naming it) before anything runs."""
    from helpers import cli
    from pacplan.worlds.quadruped import render

    engines: list[tuple[str, float]] = []
    real_walk = render.walk

    def walk(seed: int, theta: np.ndarray | None = None,
             world: QuadrupedWorld | None = None) -> Any:
        assert world is not None
        engines.append((world.engine, world.max_slope_deg))
        return real_walk(seed, theta, world)

    monkeypatch.setattr(render, "walk", walk)
    out = tmp_path / "fig.png"
    code, stdout, err = cli(["render", "quadruped", "--seed", "3", "--out", str(out),
                             "--option", "physics=mujoco", "-o", "max_slope_deg=30"], capsys)
    assert code == 0, err
    assert engines == [("mujoco", 30.0)] and "wrote" in stdout
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = tmp_path / "bad.png"
    code, _, err = cli(["render", "quadruped", "--seed", "3", "--out", str(bad),
                        "--option", "physiks=mujoco"], capsys)
    assert code == 2 and "physiks" in err and len(err.strip().splitlines()) == 1, err
    assert engines == [("mujoco", 30.0)] and not bad.exists()
