"""The oracle side of benchmarks/quadruped_oracle.py; runs in the oracle's own venv, not pacplan's.

    <oracle venv>/bin/python benchmarks/quadruped_oracle_env.py < terrains.json > outcomes.json

Imports nothing from pacplan: the robot, its assembly, its PD servo, its reset and its physics
settings all come from pybullet_envs' `MinitaurGymEnv`, built as the paper's `Minitaur_Env.py`
builds it (`urdf_version=DERPY_V0_URDF_VERSION, motor_velocity_limit=inf,
pd_control_enabled=True, hard_reset=False, on_rack=False`, `minitaur.INIT_POSITION` set to
(0, 0, 0.2)). That gives PD control at a 0.002 s physics step with an action repeat of 5 (each
target held for 0.01 s), 60 solver iterations, kp = 8, kd = 0.3.

Per terrain (read from stdin as the exact arguments of PyBullet's heightfield that pacplan builds):
a fresh env (so each terrain is independent of the ones before, as in the paper's first episode);
the terrain added as a heightfield with the friction of the plane it replaces, the plane removed;
`env.reset()` (pybullet_envs holds the motors at π/2 for 100 physics steps); five zero actions
(as the paper's `execute_policy` does); then the open-loop sine gait with its clock at simulated
time (t = 0.01 s × env steps since the gait started: the design's clock fix), until the finish
line (6 m ahead of where the gait started), a fall (the paper's rule: torso up · world up < 0.3,
or the torso below z = -1 m, off the strip) or 10 s. Output: one JSON list of outcomes.
"""

import json
import math
import os
import sys

import numpy as np


def _quiet():
    """Send C-level stdout to stderr while pybullet talks (stdout carries the JSON answer)."""
    saved = os.dup(1)
    os.dup2(2, 1)
    return saved


def _env(minitaur, minitaur_gym_env):
    minitaur.INIT_POSITION = [0, 0, 0.2]
    return minitaur_gym_env.MinitaurGymEnv(
        urdf_version=minitaur_gym_env.DERPY_V0_URDF_VERSION,
        render=False,
        motor_velocity_limit=np.inf,
        pd_control_enabled=True,
        hard_reset=False,
        on_rack=False,
    )


def _walk(env, terrain, gait, finish_dx, horizon_s):
    p = env._pybullet_client
    shape = p.createCollisionShape(
        shapeType=p.GEOM_HEIGHTFIELD,
        flags=p.GEOM_CONCAVE_INTERNAL_EDGE,
        meshScale=terrain["mesh_scale"],
        heightfieldData=terrain["heights"],
        numHeightfieldRows=terrain["rows"],
        numHeightfieldColumns=terrain["columns"],
    )
    ground = p.createMultiBody(0, shape, basePosition=terrain["base_position"])
    plane_friction = p.getDynamicsInfo(env.ground_id, -1)[1]
    p.changeDynamics(ground, -1, lateralFriction=plane_friction)
    p.removeBody(env.ground_id)
    env.ground_id = ground
    env.reset()
    for _ in range(5):
        env.step([0.0] * 8)
    robot = env.minitaur
    control_dt = env.control_time_step
    x0 = robot.GetBasePosition()[0]
    a1, a2, a_st, omega = gait
    min_up = 1.0
    fell = finished = False
    steps = 0
    for k in range(round(horizon_s / control_dt)):
        s = math.sin(omega * k * control_dt)
        u1, u2, u3, u4 = (a1 + a_st) * s, -(a1 - a_st) * s, a2 * s, -a2 * s
        env.step([u1, u2, u2, u1, u3, u4, u4, u3])
        steps = k + 1
        pos = robot.GetBasePosition()
        up = p.getMatrixFromQuaternion(robot.GetBaseOrientation())[8]
        min_up = min(min_up, up)
        if up < 0.3 or pos[2] < -1.0:
            fell = True
            break
        if pos[0] - x0 >= finish_dx:
            finished = True
            break
    dx = robot.GetBasePosition()[0] - x0
    return {"seed": terrain["seed"], "dx": dx, "fell": fell, "finished": finished,
            "sim_s": steps * control_dt, "min_up_dot": min_up,
            "cost": min(1.0, max(0.0, 1.0 - dx / finish_dx))}


def main():
    request = json.load(sys.stdin)
    saved = _quiet()
    try:
        from pybullet_envs.minitaur.envs import minitaur, minitaur_gym_env

        out = []
        for terrain in request["terrains"]:
            env = _env(minitaur, minitaur_gym_env)
            env.minitaur.time_step = request.get("paper_time_step", 0.02)  # as the paper; unused
            out.append(_walk(env, terrain, request["gait"], request["finish_dx"],
                             request["horizon_s"]))
            env._pybullet_client.disconnect()
    finally:
        os.dup2(saved, 1)
        os.close(saved)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
