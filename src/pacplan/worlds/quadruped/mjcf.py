"""MJCF for the Minitaur on ridge terrain, generated from the robot's URDF in pybullet_data.

The robot is `MjcfConfig.robot` (`scene.ROBOTS`): the Derpy (`minitaur_derpy.urdf`, the default
and the paper's) or the old `minitaur.urdf`; everything below is read from that file and from
PyBullet's loading of it, with each robot's own knee pins and joint names (`scene.RobotSpec`).

Why generate instead of loading the URDF into MuJoCo: MuJoCo's URDF import gives a fixed base,
the file's placeholder 1 kg·m² inertias and neither the knee pins nor the motors. Generated here:

- the URDF's tree as bodies (fixed joints become welded child bodies, `continuous`/`revolute`
  joints unlimited hinges, the root a free joint), its collision boxes and cylinders as geoms
  (visual meshes are dropped: MuJoCo never sees them);
- masses, inertial frames and inertias exactly as PyBullet computes them from the collision
  shapes (read with `getDynamicsInfo` on the loaded URDF, which is what the Bullet world simulates;
  the file's own inertia tensors are placeholders PyBullet ignores);
- the four knee pins of `scene` (per leg and robot) as `connect` equalities between sites;
- 8 position servos with the PD gains of `sim.PhysicsConfig` (force kp·(q* − q) − kd·q̇, the law
  `MinitaurSim` applies as explicit torques);
- the terrain: a ground box over the heightfield's extent and a fixed pool of plank boxes on
  mocap bodies. A terrain only moves the mocap bodies (`plank_poses`), so one compiled model
  serves every terrain of a world (no recompilation per environment, and the model is shared
  read-only between threads).

Contacts. Robot geoms carry `priority=1`, so a robot–terrain contact takes the robot geom's
friction and solver parameters: friction is Bullet's product rule precomputed (the feet's URDF
lateral friction 1 × terrain friction; other links Bullet's default 0.5 × terrain friction). The
foot contact (the lower legs) has Bullet stiffness 1e4 and damping 10 (the Derpy: 3e4 and 1e3),
which have no literal MuJoCo equivalent (copied as `solref="-1e4 -10"` the feet slip): it is a
calibration per robot, see `FOOT_SOLREF` and `DERPY_FOOT_SOLREF`. The Derpy's links never
collide with each other (as in the paper's code). For the Minitaur, MuJoCo drops parent–child
contacts itself, so the hubs mounted on the chassis never rub (the clean model); real
self-collisions stay on. Bullet's default model keeps five such mounted pairs;
`MujocoContact(mounted=True)` adds them back as explicit <pair>
contacts with their own MuJoCo-only softness (tried in the calibration and not adopted: in MuJoCo
they only drag, see the calibration notes above `FOOT_SOLREF`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped.scene import DEFAULT_ROBOT, robot_spec
from pacplan.worlds.quadruped.terrain import (
    GRID_X_MAX_M,
    GRID_X_MIN_M,
    STRIP_WIDTH_M,
    Terrain,
    n_ridges,
)
from pacplan.worlds.quadruped.urdf import (
    Joint,
    Link,
    bullet_inertials,
    bullet_mounted_pairs,
    parse_urdf,
    urdf_path,
)

MAX_SLOPE_DEG = 45.0  # plank boxes meet cleanly at a crest only below 45° (see `plank_poses`)
GROUND_HALF_THICKNESS_M = 0.25
PLANK_HALF_THICKNESS_M = 0.05
PARKED_Z_M = -100.0  # where unused (flat) planks wait, far below the terrain
BULLET_DEFAULT_FRICTION = 0.5  # Bullet's lateral friction of a link the URDF gives none
LEGS = ("front_left", "back_left", "front_right", "back_right")
ROBOT_CONTYPE, ROBOT_CONAFFINITY = 1, 3
TERRAIN_CONTYPE, TERRAIN_CONAFFINITY = 2, 0  # terrain touches the robot, never itself
TERRAIN_GROUP = 1  # geom group of the ground and planks (robot: 0), so rays can skip them


# The `minitaur` robot's calibration: MuJoCo-only contact parameters, tuned so that
# the open-loop
# reference gait's outcome distribution on seeds 100-139 matches Bullet's default model there
# (mean cost 0.251, falls 27.5 %; flat ground 10.13 m). Bullet's feet are a spring-damper
# (stiffness 1e4, damping 10) inside a hard complementarity solve; MuJoCo's contacts are soft by
# construction, so neither solref nor solimp has a Bullet value to copy.
# - FOOT_SOLREF: a stiff, critically damped foot contact (time constant 2.5 time steps) walks
#   flat ground at Bullet's speed (10.23 m); softer (0.01-0.02 s) slows the walk and bogs down
#   on ridges, and damping ratios <= 0.42 make the gait stall at the first ridge and fall.
# - FOOT_SOLIMP: MuJoCo's default. Harder impedances (0.93-0.99) scattered between 7.5 % and 25 %
#   falls on the 40 tuning terrains with no trend; the best of them, (0.95, 0.99), gave mean cost
#   0.226 and 14.5 % falls on the 200 check terrains against 0.243 and 12.5 % for the default
#   (Bullet 0.277 and 37 %), so it was not adopted.
# - Bullet's mounted pairs (`MujocoContact.mounted`): in MuJoCo they only drag the motors. With
#   MuJoCo's default softness the flat walk drops to 3.2 m (impedance 0.01: 9.2 m) and cost rises
#   to 0.39-0.73 on the tuning terrains while falls stay at 0-17 %, whereas Bullet's mounted
#   pairs leave its flat walk alone (10.13 m vs 10.21 m filtered) and add falls on ridges
#   (27.5 % vs 0 % filtered on seeds 100-139). Off by default.
# The fall-rate goal (within 10 points of Bullet's) is not met by any contact parameter tried.
FOOT_SOLREF = (0.005, 1.0)  # (time constant s, damping ratio)
FOOT_SOLIMP = (0.9, 0.95, 0.001)  # (impedance at zero and at full width, width m)
BODY_SOLREF = (0.02, 1.0)  # other links: MuJoCo's default (0.005-0.02 s changed no tuning run)
# The Derpy's calibration, against Bullet's Derpy on the same tuning seeds 100-139
# (reference gait: mean cost 0.696, falls 7.5 %). Its URDF gives the feet a stiffness of 3e4 and
# a damping of 1e3 (Bullet turns them into an implicit spring-damper; spinning friction 0.3
# multiplies the terrain's 0, so it has no effect in either engine). Tried (mean cost, falls,
# median per-terrain |Δx difference|): the minitaur's stiff, critically damped contact
# solref (0.005, 1), default solimp: 0.709, 12.5 %, 0.06 m (adopted); solref (0.01, 1): 0.740,
# 12.5 %, 0.09 m; the URDF's spring-damper per unit mass at 2 kg, solref (-15000, -500): 0.722,
# 20 %, 0.09 m; solref (0.005, 1) with solimp (0.95, 0.99): 0.744, 22.5 %, 0.06 m.
DERPY_FOOT_SOLREF = FOOT_SOLREF
DERPY_FOOT_SOLIMP = FOOT_SOLIMP
MOUNTED_SOLREF = (0.02, 1.0)  # mounted pairs, when added: MuJoCo's default softness
MOUNTED_SOLIMP = (0.9, 0.95, 0.001)


@dataclass(frozen=True)
class MujocoContact:
    """Contact and constraint parameters without a Bullet equivalent (the calibration).

    foot_solref, foot_solimp: the lower legs' contacts (see `FOOT_SOLREF`, `FOOT_SOLIMP`).
    pin_solref: the knee pins' constraint; 2 time steps is the stiffest MuJoCo allows.
    mounted: add Bullet's mounted link pairs (`bullet_mounted_pairs`) as <pair> contacts with
    `mounted_solref`, `mounted_solimp`, `mounted_margin` and `mounted_gap`.
    """

    foot_solref: tuple[float, float] = FOOT_SOLREF
    foot_solimp: tuple[float, float, float] = FOOT_SOLIMP
    body_solref: tuple[float, float] = BODY_SOLREF
    pin_solref: tuple[float, float] | None = None  # None: 2 × time step
    mounted: bool = False
    mounted_solref: tuple[float, float] = MOUNTED_SOLREF
    mounted_solimp: tuple[float, float, float] = MOUNTED_SOLIMP
    mounted_margin: float = 0.0
    mounted_gap: float = 0.0


MINITAUR_CONTACT = MujocoContact()
# The Derpy's calibration: see the notes above `DERPY_FOOT_SOLREF`.
DERPY_CONTACT = MujocoContact(foot_solref=DERPY_FOOT_SOLREF, foot_solimp=DERPY_FOOT_SOLIMP)


def default_contact(robot: str = DEFAULT_ROBOT) -> MujocoContact:
    """The calibrated contact parameters of `robot`."""
    return DERPY_CONTACT if robot_spec(robot).name == "derpy" else MINITAUR_CONTACT


@dataclass(frozen=True)
class MjcfConfig:
    """Everything the generated model depends on besides the URDF."""

    robot: str = DEFAULT_ROBOT
    time_step: float = 0.002
    kp: float = 8.0
    kd: float = 0.3
    terrain_friction: float = 1.0
    self_collision: bool = True
    plank_length: float = 0.5
    contact: MujocoContact = field(default_factory=MujocoContact)
    fuse_static: bool = True  # merge welded links into their parents (same masses; faster)

    @property
    def robot_self_collision(self) -> bool:
        """Robot links collide with each other: the Minitaur with `self_collision`; never the
        Derpy (loaded as the paper's code loads it, with no self-collision)."""
        return self.self_collision and self.robot == "minitaur"

    @property
    def n_planks(self) -> int:
        """Plank slots in the pool: two per ridge of this plank length."""
        return 2 * n_ridges(self.plank_length)


def _num(values: tuple[float, ...] | list[float]) -> str:
    """Shortest round-trip text of floats, so the compiled model holds these exact values."""
    return " ".join(repr(float(v)) for v in values)


def plank_size(plank_length: float) -> tuple[float, float, float]:
    """Half-sizes of every pool box: long enough for any slope below 45° (see `plank_poses`)."""
    return (plank_length / (2.0 * math.cos(math.radians(MAX_SLOPE_DEG))), STRIP_WIDTH_M / 2,
            PLANK_HALF_THICKNESS_M)


def plank_poses(terrain: Terrain) -> tuple[np.ndarray, np.ndarray]:
    """(2·ridges, 3) positions and (2·ridges, 4) quaternions (w, x, y, z) of the plank boxes.

    A plank's box is tilted by its slope with its top face on the plank and its upper corner
    exactly at the crest; the lower end runs on below the ground (under the ground box or the
    neighbouring ridge's plank), so every box has the same size. Below 45° the box corners
    under a crest stay inside the other plank. Flat planks are parked out of the way so that a
    foot never meets the ground twice.
    """
    slopes = np.asarray(terrain.slopes_deg, dtype=np.float64)
    if slopes.size and float(slopes.max()) >= MAX_SLOPE_DEG:
        raise PacplanError(
            f"the MuJoCo terrain represents slopes below {MAX_SLOPE_DEG:g}° only, terrain "
            f"{terrain.seed} has {float(slopes.max()):.1f}°"
        )
    half, _, thick = plank_size(terrain.plank_length)
    length = terrain.plank_length
    pos = np.zeros((2 * slopes.size, 3))
    quat = np.zeros((2 * slopes.size, 4))
    for k, (start, theta_deg) in enumerate(zip(terrain.ridge_starts, slopes, strict=True)):
        theta = math.radians(float(theta_deg))
        crest = np.array([start + length, 0.0, length * math.tan(theta)])
        for side, sign in enumerate((1.0, -1.0)):  # rising plank, then falling plank
            i = 2 * k + side
            if theta_deg == 0.0:
                pos[i] = (start + length, 0.0, PARKED_Z_M)
                quat[i] = (1.0, 0.0, 0.0, 0.0)
                continue
            # box x axis along the slope (pointing up-hill toward the crest for the rising one)
            along = np.array([sign * math.cos(theta), 0.0, math.sin(theta)])
            normal = np.array([-sign * math.sin(theta), 0.0, math.cos(theta)])
            pos[i] = crest - half * along - thick * normal
            # rotation about y by -sign·θ turns the box's x axis onto `along`
            quat[i] = (math.cos(theta / 2), 0.0, -sign * math.sin(theta / 2), 0.0)
    return pos, quat


def _rotate(quat: tuple[float, ...], v: tuple[float, float, float]) -> np.ndarray:
    """Vector `v` rotated by the unit quaternion (w, x, y, z)."""
    w, x, y, z = quat
    r = np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])
    return r @ np.asarray(v, dtype=np.float64)


def _body_xml(name: str, links: dict[str, Link], kids: dict[str, list[Joint]],
              inertials: dict, cfg: MjcfConfig, indent: str) -> list[str]:
    """The <body> contents of link `name` and, recursively, its children."""
    lines = []
    mass, ipos, iquat, inertia = inertials[name]
    lines.append(f'{indent}<inertial pos="{_num(ipos)}" quat="{_num(iquat)}" mass="{mass!r}" '
                 f'diaginertia="{_num(inertia)}"/>')
    link = links[name]
    foot = link.foot_friction is not None
    friction = (link.foot_friction if foot else BULLET_DEFAULT_FRICTION) * cfg.terrain_friction
    geom_class = "foot" if foot else "robot"
    for k, g in enumerate(link.geoms):
        lines.append(f'{indent}<geom name="{name}_{k}" class="{geom_class}" type="{g.kind}" '
                     f'size="{_num(g.size)}" pos="{_num(g.pos)}" quat="{_num(g.quat)}" '
                     f'friction="{friction!r} 0.005 0.0001"/>')
    # PyBullet places a constraint's pivot in the link's inertial (centre-of-mass) frame, not
    # its URDF frame: the Derpy's lower legs have their centre of mass 0.1-0.12 m up the leg.
    pins = robot_spec(cfg.robot).knee_pins
    for leg_index, leg in enumerate(LEGS):
        for side, point in zip("RL", pins[leg_index], strict=True):
            if name == f"lower_leg_{leg}{side}_link":
                site = np.asarray(ipos) + _rotate(iquat, point)
                lines.append(f'{indent}<site name="pin_{leg}{side}" pos="{_num(site)}"/>')
    for j in kids.get(name, []):
        lines.append(f'{indent}<body name="{j.child}" pos="{_num(j.pos)}" quat="{_num(j.quat)}">')
        if j.kind in ("continuous", "revolute"):
            lines.append(f'{indent}  <joint name="{j.name}" type="hinge" axis="{_num(j.axis)}"/>')
        elif j.kind != "fixed":
            raise PacplanError(f"URDF: joint type {j.kind!r} of {j.name} is not supported")
        lines.extend(_body_xml(j.child, links, kids, inertials, cfg, indent + "  "))
        lines.append(f"{indent}</body>")
    return lines


def _mounted_pair_xml(links: dict[str, Link], contact: MujocoContact) -> list[str]:
    """Explicit <pair> contacts for Bullet's mounted link pairs (MuJoCo would filter the
    parent–child ones), every geom of one link against every geom of the other."""
    mu = BULLET_DEFAULT_FRICTION * BULLET_DEFAULT_FRICTION  # Bullet's product rule
    lines = ["  <contact>"]
    for a, b in bullet_mounted_pairs(urdf_path("minitaur")):
        for i in range(len(links[a].geoms)):
            for j in range(len(links[b].geoms)):
                lines.append(
                    f'    <pair geom1="{a}_{i}" geom2="{b}_{j}" condim="3" '
                    f'friction="{mu!r} {mu!r} 0.005 0.0001 0.0001" '
                    f'solref="{_num(contact.mounted_solref)}" '
                    f'solimp="{_num(contact.mounted_solimp)}" '
                    f'margin="{contact.mounted_margin!r}" gap="{contact.mounted_gap!r}"/>')
    lines.append("  </contact>")
    return lines


def motor_joint_names() -> list[str]:
    """The 8 motor joints in leg-model order [FL.L, FL.R, BL.L, BL.R, FR.L, FR.R, BR.L, BR.R]."""
    return [f"motor_{leg}{side}_joint" for leg in LEGS for side in "LR"]


def knee_joint_names(robot: str = DEFAULT_ROBOT) -> list[str]:
    """The 8 knee joints of `robot`, in the motors' order."""
    pattern = robot_spec(robot).knee_joint
    return [pattern.format(leg=leg, side=side) for leg in LEGS for side in "LR"]


def minitaur_mjcf(cfg: MjcfConfig | None = None, terrain: Terrain | None = None) -> str:
    """The MJCF text of the robot, the ground and the plank pool (placed for `terrain` if
    given, else parked). Deterministic: the same inputs give the same string."""
    cfg = cfg or MjcfConfig()
    if cfg.time_step <= 0 or cfg.kp < 0 or cfg.kd < 0 or cfg.terrain_friction <= 0:
        raise PacplanError("time_step and terrain_friction must be positive, kp and kd >= 0")
    if terrain is not None and abs(terrain.plank_length - cfg.plank_length) > 1e-12:
        raise PacplanError(f"terrain planks are {terrain.plank_length} m, the model's pool "
                           f"holds {cfg.plank_length} m planks")
    path = urdf_path(cfg.robot)
    root, links, joints = parse_urdf(path)
    inertials = bullet_inertials(path)
    by_name = {lk.name: lk for lk in links}
    kids: dict[str, list[Joint]] = {}
    for j in joints:
        kids.setdefault(j.parent, []).append(j)
    foot_ref = cfg.contact.foot_solref
    pin_ref = cfg.contact.pin_solref or (2.0 * cfg.time_step, 1.0)
    robot_affinity = ROBOT_CONAFFINITY if cfg.robot_self_collision else TERRAIN_CONTYPE
    n = cfg.n_planks
    if terrain is not None:
        pos, quat = plank_poses(terrain)
    else:
        pos = np.tile([0.0, 0.0, PARKED_Z_M], (n, 1))
        quat = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
    x_mid = 0.5 * (GRID_X_MIN_M + GRID_X_MAX_M)
    x_half = 0.5 * (GRID_X_MAX_M - GRID_X_MIN_M)
    lines = [
        f'<mujoco model="{cfg.robot}_terrain">',
        f'  <compiler angle="radian" autolimits="true" '
        f'fusestatic="{str(cfg.fuse_static).lower()}"/>',
        f'  <option timestep="{cfg.time_step!r}" gravity="0 0 -10" integrator="Euler" '
        'cone="pyramidal"/>',
        "  <default>",
        f'    <default class="robot"><geom contype="{ROBOT_CONTYPE}" '
        f'conaffinity="{robot_affinity}" priority="1" '
        f'solref="{_num(cfg.contact.body_solref)}"/></default>',
        f'    <default class="foot"><geom contype="{ROBOT_CONTYPE}" '
        f'conaffinity="{robot_affinity}" priority="1" solref="{_num(foot_ref)}" '
        f'solimp="{_num(cfg.contact.foot_solimp)}"/></default>',
        f'    <default class="terrain"><geom contype="{TERRAIN_CONTYPE}" '
        f'conaffinity="{TERRAIN_CONAFFINITY}" group="{TERRAIN_GROUP}" '
        f'friction="{cfg.terrain_friction!r} 0.005 0.0001"/></default>',
        "  </default>",
        "  <worldbody>",
        f'    <geom name="ground" class="terrain" type="box" '
        f'pos="{_num((x_mid, 0.0, -GROUND_HALF_THICKNESS_M))}" '
        f'size="{_num((x_half, STRIP_WIDTH_M / 2, GROUND_HALF_THICKNESS_M))}"/>',
        f'    <body name="{root}" pos="0 0 0.2">',
        '      <freejoint name="base"/>',
        *_body_xml(root, by_name, kids, inertials, cfg, "      "),
        "    </body>",
    ]
    size = plank_size(cfg.plank_length)
    for i in range(n):
        lines.append(f'    <body name="plank{i}" mocap="true" pos="{_num(pos[i])}" '
                     f'quat="{_num(quat[i])}"><geom name="plank{i}" class="terrain" type="box" '
                     f'size="{_num(size)}"/></body>')
    lines.append("  </worldbody>")
    if cfg.robot_self_collision and cfg.contact.mounted:
        lines.extend(_mounted_pair_xml(by_name, cfg.contact))
    lines.append("  <equality>")
    for leg in LEGS:
        lines.append(f'    <connect name="knee_pin_{leg}" site1="pin_{leg}R" site2="pin_{leg}L" '
                     f'solref="{_num(pin_ref)}"/>')
    lines += ["  </equality>", "  <actuator>"]
    for name in motor_joint_names():
        lines.append(f'    <position name="{name}" joint="{name}" kp="{cfg.kp!r}" '
                     f'kv="{cfg.kd!r}"/>')
    lines += ["  </actuator>", "</mujoco>", ""]
    return "\n".join(lines)
