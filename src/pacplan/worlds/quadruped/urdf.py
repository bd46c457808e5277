"""The robot's URDF as both engines see it: its kinematic tree and collision shapes (parsed
here), and what PyBullet makes of it when loaded (masses and inertias from the collision
shapes; for the old Minitaur, the link pairs Bullet keeps in contact). `mjcf` turns these into
the MuJoCo model; `paper_code` reads the tree too.
"""

from __future__ import annotations

import functools
import math
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped.scene import DEFAULT_ROBOT, robot_spec


@dataclass(frozen=True)
class Geom:
    kind: str  # "box" | "cylinder"
    size: tuple[float, ...]  # MuJoCo half-sizes
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]


@dataclass(frozen=True)
class Link:
    name: str
    geoms: tuple[Geom, ...]
    foot_friction: float | None  # the URDF's <contact> lateral friction (feet only)


@dataclass(frozen=True)
class Joint:
    name: str
    kind: str
    parent: str
    child: str
    pos: tuple[float, float, float]
    quat: tuple[float, float, float, float]
    axis: tuple[float, float, float]


def urdf_path(robot: str = DEFAULT_ROBOT) -> str:
    """The URDF of `robot` in pybullet_data, the model both engines simulate."""
    return robot_spec(robot).urdf_path()


def rpy_to_quat(rpy: tuple[float, float, float]) -> tuple[float, float, float, float]:
    """URDF roll-pitch-yaw (R = Rz·Ry·Rx) -> MuJoCo quaternion (w, x, y, z)."""
    r, p, y = (0.5 * a for a in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), \
        math.sin(y)
    return (
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    )


def _floats(text: str | None, n: int, default: float = 0.0) -> tuple[float, ...]:
    if text is None:
        return (default,) * n
    values = tuple(float(v) for v in text.split())
    if len(values) != n:
        raise PacplanError(f"URDF: expected {n} numbers, got {text!r}")
    return values


def _origin(el: ET.Element | None) -> tuple[tuple[float, float, float], tuple[float, ...]]:
    origin = None if el is None else el.find("origin")
    if origin is None:
        return (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0)
    xyz = _floats(origin.get("xyz"), 3)
    return (xyz[0], xyz[1], xyz[2]), rpy_to_quat(_floats(origin.get("rpy"), 3))  # type: ignore[arg-type]


def _parse_geom(collision: ET.Element) -> Geom:
    pos, quat = _origin(collision)
    shape = collision.find("geometry")
    box = None if shape is None else shape.find("box")
    cylinder = None if shape is None else shape.find("cylinder")
    if box is not None:
        size = tuple(0.5 * v for v in _floats(box.get("size"), 3))
        return Geom("box", size, pos, quat)  # type: ignore[arg-type]
    if cylinder is not None:
        radius = float(cylinder.get("radius", "nan"))
        half = 0.5 * float(cylinder.get("length", "nan"))
        return Geom("cylinder", (radius, half), pos, quat)  # type: ignore[arg-type]
    raise PacplanError("URDF: only box and cylinder collision shapes are supported")


@functools.lru_cache(maxsize=4)
def parse_urdf(path: str) -> tuple[str, tuple[Link, ...], tuple[Joint, ...]]:
    """(root link name, links, joints) of a URDF: the collision shapes and the kinematic tree."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise PacplanError(f"cannot read the URDF {path}: {exc}") from exc
    links = []
    for el in root.findall("link"):
        contact = el.find("contact")
        friction = None
        if contact is not None and contact.find("lateral_friction") is not None:
            friction = float(contact.find("lateral_friction").get("value", "nan"))  # type: ignore[union-attr]
        geoms = tuple(_parse_geom(c) for c in el.findall("collision"))
        links.append(Link(el.get("name", ""), geoms, friction))
    joints = []
    for el in root.findall("joint"):
        pos, quat = _origin(el)
        axis_el = el.find("axis")
        axis = _floats(None if axis_el is None else axis_el.get("xyz"), 3)
        if axis_el is None:
            axis = (1.0, 0.0, 0.0)
        parent, child = el.find("parent"), el.find("child")
        if parent is None or child is None:
            raise PacplanError(f"URDF: joint {el.get('name')} lacks a parent or child")
        joints.append(Joint(el.get("name", ""), el.get("type", ""), parent.get("link", ""),
                             child.get("link", ""), pos, quat, axis))  # type: ignore[arg-type]
    children = {j.child for j in joints}
    roots = [lk.name for lk in links if lk.name not in children]
    if len(roots) != 1:
        raise PacplanError(f"URDF: expected one root link, found {roots}")
    return roots[0], tuple(links), tuple(joints)


@functools.lru_cache(maxsize=4)
def bullet_inertials(path: str) -> dict[str, tuple[float, tuple[float, ...], tuple[float, ...],
                                                   tuple[float, ...]]]:
    """{link: (mass, inertial pos, inertial quat (w, x, y, z), principal inertia)} as PyBullet
    computes them for the loaded URDF (from the collision shapes; the file's tensors are
    placeholders)."""
    import pybullet

    from pacplan.worlds.quadruped.scene import quiet_stdout

    with quiet_stdout():
        cid = pybullet.connect(pybullet.DIRECT)
    try:
        with quiet_stdout():
            robot = pybullet.loadURDF(path, physicsClientId=cid)
        names = {-1: pybullet.getBodyInfo(robot, physicsClientId=cid)[0].decode()}
        for j in range(pybullet.getNumJoints(robot, physicsClientId=cid)):
            names[j] = pybullet.getJointInfo(robot, j, physicsClientId=cid)[12].decode()
        out = {}
        for j, name in names.items():
            info = pybullet.getDynamicsInfo(robot, j, physicsClientId=cid)
            x, y, z, w = info[4]
            out[name] = (float(info[0]), tuple(info[3]), (w, x, y, z), tuple(info[2]))
        return out
    finally:
        pybullet.disconnect(physicsClientId=cid)


@functools.lru_cache(maxsize=4)
def bullet_mounted_pairs(path: str) -> tuple[tuple[str, str], ...]:
    """The link pairs Bullet's default model keeps in contact: those within 1 mm of each other
    in the assembled rest pose and not parent and child (`scene.mounted_pairs` on the robot
    `scene.load_minitaur` builds with mounted contacts), by link name, sorted."""
    import pybullet

    from pacplan.worlds.quadruped.scene import load_minitaur, mounted_pairs, quiet_stdout

    if path != urdf_path("minitaur"):
        raise PacplanError("mounted pairs are measured on pybullet_data's minitaur.urdf only")
    with quiet_stdout():
        cid = pybullet.connect(pybullet.DIRECT)
    try:
        robot, _ = load_minitaur(cid, self_collision=True, mounted_contacts=True)
        names = {-1: pybullet.getBodyInfo(robot, physicsClientId=cid)[0].decode()}
        for j in range(pybullet.getNumJoints(robot, physicsClientId=cid)):
            names[j] = pybullet.getJointInfo(robot, j, physicsClientId=cid)[12].decode()
        pairs = {tuple(sorted((names[a], names[b]))) for a, b in mounted_pairs(cid, robot)}
        return tuple(sorted(pairs))  # type: ignore[arg-type]
    finally:
        pybullet.disconnect(physicsClientId=cid)
