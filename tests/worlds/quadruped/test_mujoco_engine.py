"""The MuJoCo engine of the quadruped world: the generated model, the simulator and the world
option `physics="mujoco"`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pybullet
import pytest

mujoco = pytest.importorskip("mujoco")

from pacplan.errors import PacplanError  # noqa: E402
from pacplan.worlds.quadruped import QuadrupedWorld, episode  # noqa: E402
from pacplan.worlds.quadruped.episode import RolloutConfig  # noqa: E402
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT  # noqa: E402
from pacplan.worlds.quadruped.mjcf import (  # noqa: E402
    DERPY_FOOT_SOLIMP,
    DERPY_FOOT_SOLREF,
    FOOT_SOLIMP,
    FOOT_SOLREF,
    MjcfConfig,
    MujocoContact,
    knee_joint_names,
    minitaur_mjcf,
    motor_joint_names,
    plank_poses,
)
from pacplan.worlds.quadruped.mujoco_sim import MujocoMinitaurSim  # noqa: E402
from pacplan.worlds.quadruped.policy import POLICY_DIM  # noqa: E402
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout  # noqa: E402
from pacplan.worlds.quadruped.scene import (  # noqa: E402
    LEGS,
    MOTOR_DIRECTION,
    START_POSITION,
    load_robot,
    quiet_stdout,
    robot_spec,
)
from pacplan.worlds.quadruped.sim import MinitaurSim, PhysicsConfig  # noqa: E402
from pacplan.worlds.quadruped.terrain import sample_terrain  # noqa: E402
from pacplan.worlds.quadruped.urdf import (  # noqa: E402
    bullet_inertials,
    bullet_mounted_pairs,
    urdf_path,
)


@pytest.fixture(scope="module")
def sim() -> Iterator[MujocoMinitaurSim]:
    s = MujocoMinitaurSim()
    yield s
    s.close()


ROBOTS = ("derpy", "minitaur")


def _model(terrain_seed: int | None = None, robot: str = "derpy",
           fuse_static: bool = True) -> mujoco.MjModel:
    terrain = None if terrain_seed is None else sample_terrain(terrain_seed)
    cfg = MjcfConfig(robot=robot, fuse_static=fuse_static)
    return mujoco.MjModel.from_xml_string(minitaur_mjcf(cfg, terrain))


@pytest.mark.parametrize("robot", ROBOTS)
def test_mjcf_is_deterministic_with_a_free_base_pins_and_servos(robot: str) -> None:
    cfg = MjcfConfig(robot=robot)
    assert minitaur_mjcf(cfg) == minitaur_mjcf(cfg)
    assert minitaur_mjcf(cfg) != minitaur_mjcf(MjcfConfig(robot=ROBOTS[robot == "derpy"]))
    m = _model(robot=robot, fuse_static=False)
    base = m.body("base_chassis_link")
    assert m.jnt_type[m.body_jntadr[base.id]] == mujoco.mjtJoint.mjJNT_FREE
    assert m.nbody - 1 - m.nmocap == 27  # the URDF's 27 links
    fused = _model(robot=robot)  # welded links merged into their parents: 17 bodies, same mass
    assert fused.nbody - 1 - fused.nmocap == 17
    assert fused.body_subtreemass[1] == pytest.approx(m.body_subtreemass[1], abs=1e-9)
    assert m.nu == 8 and m.neq == 4
    assert all(m.eq_type[i] == mujoco.mjtEq.mjEQ_CONNECT for i in range(m.neq))
    np.testing.assert_allclose(m.actuator_gainprm[:, 0], 8.0)
    np.testing.assert_allclose(m.actuator_biasprm[:, 2], -0.3)


@pytest.mark.parametrize("robot", ROBOTS)
def test_masses_and_inertias_equal_pybullets(robot: str) -> None:
    m = _model(robot=robot, fuse_static=False)
    inertials = bullet_inertials(urdf_path(robot))
    assert len(inertials) == 27
    for name, (mass, _, _, inertia) in inertials.items():
        body = m.body(name)
        assert abs(m.body_mass[body.id] - mass) < 1e-9, name
        np.testing.assert_allclose(m.body_inertia[body.id], inertia, rtol=0, atol=1e-9)
    total = sum(v[0] for v in inertials.values())
    assert m.body_subtreemass[m.body("base_chassis_link").id] == pytest.approx(total, abs=1e-9)
    assert total == pytest.approx({"derpy": 7.166, "minitaur": 6.0}[robot], abs=1e-3)


@pytest.mark.parametrize("robot", ROBOTS)
def test_knee_pins_sit_where_pybullet_pins_them(robot: str) -> None:
    """In the assembled rest pose, each MuJoCo pin site is where PyBullet's constraint pivot is
    (PyBullet places a pivot in the link's centre-of-mass frame: the Derpy's lower legs have
    theirs 0.1-0.12 m up the leg). (In the Derpy's rest pose the two halves are still apart:
    the knee angle is the Minitaur's, and the pin pulls them together at the first steps, in
    pybullet_envs as here.)"""
    spec = robot_spec(robot)
    with quiet_stdout():
        cid = pybullet.connect(pybullet.DIRECT)
    try:
        body, _ = load_robot(cid, spec)
        names = {pybullet.getJointInfo(body, j, physicsClientId=cid)[12].decode(): j
                 for j in range(pybullet.getNumJoints(body, physicsClientId=cid))}
        bullet_pins = {}
        for leg_index, leg in enumerate(LEGS):
            for side, pivot in zip("RL", spec.knee_pins[leg_index], strict=True):
                state = pybullet.getLinkState(body, names[f"lower_leg_{leg}{side}_link"],
                                              physicsClientId=cid)
                rot = np.array(pybullet.getMatrixFromQuaternion(state[1])).reshape(3, 3)
                bullet_pins[leg, side] = np.array(state[0]) + rot @ np.array(pivot)
    finally:
        pybullet.disconnect(cid)
    m = _model(robot=robot)
    d = mujoco.MjData(m)
    d.qpos[:7] = (*START_POSITION, 1.0, 0.0, 0.0, 0.0)
    for i, (motor, knee) in enumerate(zip(motor_joint_names(), knee_joint_names(robot),
                                          strict=True)):
        d.qpos[m.jnt_qposadr[m.joint(motor).id]] = MOTOR_DIRECTION[i] * np.pi / 2
        d.qpos[m.jnt_qposadr[m.joint(knee).id]] = MOTOR_DIRECTION[i] * -2.1834
    mujoco.mj_kinematics(m, d)
    for (leg, side), where in bullet_pins.items():
        np.testing.assert_allclose(d.site(f"pin_{leg}{side}").xpos, where, atol=1e-6)


def test_calibrated_foot_contact_and_optional_mounted_pairs() -> None:
    """The feet carry each robot's calibrated solref/solimp; the Derpy's links never collide
    with each other (as in the paper's code); the Minitaur's mounted pairs are off by default,
    and `mounted=True` adds Bullet's as explicit contacts between their geoms."""
    m = _model()
    foot = m.geom("lower_leg_front_leftL_link_0").id
    np.testing.assert_allclose(m.geom_solref[foot], DERPY_FOOT_SOLREF)
    np.testing.assert_allclose(m.geom_solimp[foot][:3], DERPY_FOOT_SOLIMP)
    robot_geoms = m.geom_group == 0
    assert not np.any(m.geom_conaffinity[robot_geoms] & m.geom_contype[robot_geoms])
    m = _model(robot="minitaur")
    foot = m.geom("lower_leg_front_leftL_link_0").id
    np.testing.assert_allclose(m.geom_solref[foot], FOOT_SOLREF)
    np.testing.assert_allclose(m.geom_solimp[foot][:3], FOOT_SOLIMP)
    assert m.npair == 0
    pairs = bullet_mounted_pairs(urdf_path("minitaur"))
    assert len(pairs) == 5 and ("chassis_left", "upper_leg_back_leftR_link") in pairs
    mounted = mujoco.MjModel.from_xml_string(
        minitaur_mjcf(MjcfConfig(robot="minitaur", fuse_static=False,
                                 contact=MujocoContact(mounted=True, mounted_gap=0.001))))
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


@pytest.mark.parametrize("robot", ROBOTS)
def test_settles_like_pybullet(robot: str) -> None:
    """After the settling, torso height and motor angles are PyBullet's (the same robot)."""
    terrain = sample_terrain(0, 0.0)
    mj = MujocoMinitaurSim(PhysicsConfig(robot=robot))
    bullet = MinitaurSim(PhysicsConfig(robot=robot))
    try:
        mj.reset(terrain)
        bullet.reset(terrain)
        assert mj.torso_pose()[0][2] == pytest.approx(bullet.torso_pose()[0][2], abs=0.01)
        np.testing.assert_allclose(mj.motor_state()[0], bullet.motor_state()[0], atol=0.04)
        assert mj.time == 0.0 and mj.proprioception().shape == (22,)
    finally:
        bullet.close()


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
        QuadrupedWorld(physics="mujoco", robot="minitaur", mounted_contacts=False)
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
    """Bullet's Derpy on seeds 100-119 (the calibration's first 20 terrains): mean cost 0.741,
    3 falls, mean Δx 1.55 m; flat ground 10.82 m (benchmarks/quadruped_engines.py)."""
    gait = fixed_gait_controller(REFERENCE_GAIT)
    rs = [rollout(sim, sample_terrain(s), gait, needs_depth=False) for s in range(100, 120)]
    assert np.mean([r.cost for r in rs]) == pytest.approx(0.741, abs=0.06)
    assert sum(r.fell for r in rs) <= 3 + 3
    flat = rollout(sim, sample_terrain(0, 0.0), gait, RolloutConfig(finish_dx=1e6),
                   needs_depth=False)
    assert flat.dx == pytest.approx(10.82, rel=0.05) and not flat.fell


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
