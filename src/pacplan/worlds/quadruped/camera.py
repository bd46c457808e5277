"""Torso depth camera: pose on the robot and a 50 × 50 z-depth image from PyBullet's renderer.

The camera sits at (0.1, 0, 0.1) m in the torso frame, looks along the torso's heading pitched
down by atan(0.05) ≈ 2.86° (the public code's view axis (1, 0, −0.05)), with a 90° field of view.
It renders with PyBullet's software renderer (TinyRenderer, what a DIRECT client's camera uses):
about 1 ms a frame, where casting 2,500 rays takes about 50 ms once the robot is in the scene.
The robot's own legs and torso are visible in the lower rows, as they would be on the real robot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pacplan.extras import require

pybullet = require("pybullet", "the quadruped world")

CAMERA_NEAR_M = 0.01


@dataclass(frozen=True)
class CameraConfig:
    """Torso depth camera: offset in the torso frame, downward pitch, field of view, far value."""

    offset: tuple[float, float, float] = (0.1, 0.0, 0.1)
    pitch_deg: float = math.degrees(math.atan(0.05))  # the public code's view axis (1, 0, -0.05)
    fov_deg: float = 90.0
    size: int = 50
    far_m: float = 10.0


def camera_pose(
    torso_pos: np.ndarray, torso_orn: np.ndarray, cfg: CameraConfig
) -> tuple[np.ndarray, np.ndarray]:
    """World position of the camera and the (3, 3) rotation camera -> world, whose columns are
    the optical axis, the image's left and its up direction."""
    rot = np.array(pybullet.getMatrixFromQuaternion(list(torso_orn))).reshape(3, 3)
    p = math.radians(cfg.pitch_deg)
    pitch = np.array(
        [[math.cos(p), 0.0, math.sin(p)], [0.0, 1.0, 0.0], [-math.sin(p), 0.0, math.cos(p)]]
    )  # rotation about y that tips the optical axis down by p
    return np.asarray(torso_pos) + rot @ np.array(cfg.offset), rot @ pitch


def render_depth(
    cid: int, torso_pos: np.ndarray, torso_orn: np.ndarray, cfg: CameraConfig
) -> np.ndarray:
    """(size, size) float32 z-depth in metres (distance along the optical axis), row 0 at the
    top; anything beyond the far value, such as the sky, reads far."""
    eye, rot = camera_pose(torso_pos, torso_orn, cfg)
    view = pybullet.computeViewMatrix(
        eye.tolist(), (eye + rot[:, 0]).tolist(), rot[:, 2].tolist(), physicsClientId=cid
    )
    proj = pybullet.computeProjectionMatrixFOV(
        cfg.fov_deg, 1.0, CAMERA_NEAR_M, cfg.far_m, physicsClientId=cid
    )
    _, _, _, buffer, _ = pybullet.getCameraImage(
        cfg.size,
        cfg.size,
        view,
        proj,
        renderer=pybullet.ER_TINY_RENDERER,
        flags=pybullet.ER_NO_SEGMENTATION_MASK,
        physicsClientId=cid,
    )
    d = np.asarray(buffer, dtype=np.float64).reshape(cfg.size, cfg.size)
    near, far = CAMERA_NEAR_M, cfg.far_m
    z = far * near / (far - (far - near) * d)  # perspective depth buffer -> metres
    return np.clip(z, near, far).astype(np.float32)
