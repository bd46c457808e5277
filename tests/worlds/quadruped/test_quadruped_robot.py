"""The quadruped's robot option: the paper's Minitaur Derpy by default, the old Minitaur on
request, and bad input refused in one line."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pybullet
import pybullet_data
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gait import REFERENCE_GAIT
from pacplan.worlds.quadruped.scene import DERPY, MINITAUR, ROBOTS, load_robot, quiet_stdout
from pacplan.worlds.quadruped.sim import MinitaurSim, PhysicsConfig
from pacplan.worlds.quadruped.terrain import sample_terrain


def _one_line(exc: pytest.ExceptionInfo[PacplanError]) -> str:
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_default_robot_is_the_derpy() -> None:
    world = QuadrupedWorld()
    assert world.robot == "derpy" and world.physics.robot == "derpy"
    assert world.physics.fall_up_dot == 0.3  # the paper's Minitaur_Env.is_fallen
    assert QuadrupedWorld(robot="minitaur").physics.fall_up_dot == 0.5


def test_unknown_robot_is_refused_naming_the_allowed_values() -> None:
    with pytest.raises(PacplanError) as exc:
        QuadrupedWorld(robot="derby")
    text = _one_line(exc)
    assert "robot" in text and "derpy, minitaur" in text and "'derby'" in text


@pytest.mark.parametrize("option", ["self_collision", "mounted_contacts"])
def test_minitaur_only_options_are_refused_for_the_derpy(option: str) -> None:
    with pytest.raises(PacplanError) as exc:
        QuadrupedWorld(**{option: False})
    text = _one_line(exc)
    assert option in text and "'minitaur'" in text
    QuadrupedWorld(robot="minitaur", **{option: False})  # accepted where it applies


def test_a_missing_urdf_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pybullet_data, "getDataPath", lambda: str(tmp_path))
    with pytest.raises(PacplanError) as exc:
        QuadrupedWorld()
    text = _one_line(exc)
    assert os.path.join(str(tmp_path), "quadruped", "minitaur_derpy.urdf") in text


def _loaded(robot_name: str, **kw: bool) -> tuple[int, int]:
    with quiet_stdout():
        cid = pybullet.connect(pybullet.DIRECT)
    body, _ = load_robot(cid, ROBOTS[robot_name], **kw)
    return cid, body


def test_derpy_is_the_papers_robot_with_no_self_collision() -> None:
    """The Derpy weighs 7.17 kg; loaded with EXCLUDE_PARENT alone, none of its links collide
    with each other — the Minitaur with self-collision on has links in contact at rest."""
    cid, body = _loaded("derpy")
    try:
        n = pybullet.getNumJoints(body, physicsClientId=cid)
        mass = sum(pybullet.getDynamicsInfo(body, j, physicsClientId=cid)[0]
                   for j in range(-1, n))
        assert mass == pytest.approx(7.166, abs=1e-3)
        names = {pybullet.getJointInfo(body, j, physicsClientId=cid)[1].decode()
                 for j in range(n)}
        assert "knee_front_leftL_joint" in names  # the Derpy's own joint names
        pybullet.performCollisionDetection(physicsClientId=cid)
        assert pybullet.getContactPoints(body, body, physicsClientId=cid) == ()
    finally:
        pybullet.disconnect(cid)
    cid, body = _loaded("minitaur", self_collision=True, mounted_contacts=True)
    try:
        pybullet.performCollisionDetection(physicsClientId=cid)
        assert len(pybullet.getContactPoints(body, body, physicsClientId=cid)) > 0
    finally:
        pybullet.disconnect(cid)


def test_derpy_knee_pins_follow_pybullet_envs() -> None:
    """pybullet_envs' minitaur_derpy.py: (0, 0.0055, 0.100) and (0, 0.0055, 0.088), the short
    one on the R lower leg of the left-hand legs and on the L lower leg of the right-hand legs."""
    short, long_ = (0.0, 0.0055, 0.100), (0.0, 0.0055, 0.088)
    assert DERPY.knee_pins == ((short, long_), (short, long_), (long_, short), (long_, short))
    assert MINITAUR.knee_pins[0] == ((0.0, 0.005, 0.2), (0.0, 0.01, 0.2))
    cid, _ = _loaded("derpy")
    try:
        pivots = set()
        for i in range(pybullet.getNumConstraints(physicsClientId=cid)):
            info = pybullet.getConstraintInfo(pybullet.getConstraintUniqueId(i, cid),
                                              physicsClientId=cid)
            assert info[4] == pybullet.JOINT_POINT2POINT
            pivots.add((tuple(round(v, 6) for v in info[6]), tuple(round(v, 6) for v in info[7])))
        assert pivots == {(short, long_), (long_, short)}
    finally:
        pybullet.disconnect(cid)


@pytest.mark.parametrize("robot", ["derpy", "minitaur"])
def test_fall_rule_per_robot(robot: str) -> None:
    """Tilted so that torso up · world up = 0.4: a fall for the Minitaur's 0.5 rule, not for
    the Derpy's 0.3 (the paper's)."""
    sim = MinitaurSim(PhysicsConfig(robot=robot))
    try:
        sim.reset(sample_terrain(0, 0.0))
        roll = math.acos(0.4)
        pos, _ = sim.torso_pose()
        pybullet.resetBasePositionAndOrientation(
            sim.robot, pos.tolist(), pybullet.getQuaternionFromEuler([roll, 0.0, 0.0]),
            physicsClientId=sim.cid)
        up = pybullet.getMatrixFromQuaternion(sim.torso_pose()[1].tolist())[8]
        assert up == pytest.approx(0.4, abs=1e-9)
        assert sim.is_fallen() == (robot == "minitaur")
    finally:
        sim.close()


def test_derpy_walks_differently_from_the_minitaur() -> None:
    """The option changes the robot: the reference gait's first primitive on flat ground moves
    the two robots by different amounts (and the Derpy settles lower: 0.17 m vs 0.20 m)."""
    terrain = sample_terrain(0, 0.0)
    heights, moved = {}, {}
    for robot in ("derpy", "minitaur"):
        world = QuadrupedWorld(robot=robot)
        world.sim.reset(terrain)
        heights[robot] = float(world.sim.torso_pose()[0][2])
        x0 = world.sim.torso_x()
        world.sim.run_primitive(REFERENCE_GAIT, 0.5)
        moved[robot] = world.sim.torso_x() - x0
        world.close()
    assert not np.isclose(moved["derpy"], moved["minitaur"], atol=1e-3)
    assert heights["derpy"] != pytest.approx(heights["minitaur"], abs=1e-3)
