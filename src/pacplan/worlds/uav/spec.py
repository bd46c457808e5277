"""The numbers of the UAV world (docs/design.md §4) in one place, and the camera geometry.

Both simulators, the policy and the figures read these constants, so the two simulators cannot
drift apart on a number. Nothing here depends on torch or PyBullet.
"""

from __future__ import annotations

import math

import numpy as np

# Tunnel: floor, ceiling and side walls (planes); PyBullet boxes span y in [Y_MIN, Y_MAX].
FLOOR_Z = 0.0
CEIL_Z = 4.0
WALL_X = 5.0
TUNNEL_Y_MIN = -10.0
TUNNEL_Y_MAX = 40.0

# Obstacles: 20 finite solid cylinders.
N_OBSTACLES = 20
OBST_X = (-5.0, 5.0)
OBST_Y = (0.0, 14.0)
OBST_RADIUS = (0.05, 0.30)
OBST_LENGTH = 10.0
OBST_HALF = OBST_LENGTH / 2.0
START_CLEARANCE = 1.25

# Robot.
START = (0.0, 0.0, 2.0)
ROBOT_RADIUS = 0.3

# Camera.
IMG = 50
FOV_DEG = 130.0
CAM_OFFSET = (0.0, 0.17, -0.09)
CAM_PITCH_DEG = 4.4  # down
FAR = 20.0
NEAR = 0.01  # PyBullet needs a near plane; nothing is ever this close (camera is inside the sphere)

# Primitives and rollout.
OFFSETS = (-1.0, -0.5, 0.0, 0.5, 1.0)
N_PRIMS = 25
SPEED = 1.25
PRIM_DURATION = 1.0
SIGMOID_GAIN = 6.5
N_STEPS = 12
HORIZON = N_STEPS * PRIM_DURATION
CHECK_DT = 0.05
CHECKS_PER_PRIM = 20  # checks at local t = 0.05, 0.10, ..., 1.00
GRID = 0.5  # every lateral/vertical offset is a multiple of this, so states live on a grid

# Policy: net weight layout (PyTorch state_dict order) and the default net score scale (metres;
# why 5 m: see policy.py).
DEFAULT_NET_SCALE = 5.0

# Flat θ layout (the order of the weights in the vector), PyTorch's state_dict order.
NET_SHAPES: tuple[tuple[str, tuple[int, ...]], ...] = (
    ("conv1.weight", (2, 1, 4, 4)),
    ("conv1.bias", (2,)),
    ("conv2.weight", (1, 2, 2, 2)),
    ("conv2.bias", (1,)),
    ("fc1.weight", (25, 529)),
    ("fc1.bias", (25,)),
    ("fc2.weight", (25, 25)),
    ("fc2.bias", (25,)),
)
POLICY_DIM = int(sum(int(np.prod(s)) for _, s in NET_SHAPES))
assert POLICY_DIM == 13_943

# Depth Filter cell size (pixels).
CELL = 5

# Where pixel (row i, col j) samples the image plane, in continuous coordinates with the origin at
# the top-left image corner: (row i + 1, col j). This is PyBullet's TinyRenderer convention (it
# rasterises at integer coordinates with a bottom-left origin), measured against an empty tunnel
# where it makes the two simulators agree to 1e-3 m; pixel centres (i + 0.5, j + 0.5) would leave
# a half-pixel shift and errors of metres at every edge.
SAMPLE_ROW_OFFSET = 1.0
SAMPLE_COL_OFFSET = 0.0


def camera_axes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(right, up, forward) unit vectors in world coordinates; the robot never rotates."""
    p = math.radians(CAM_PITCH_DEG)
    forward = np.array([0.0, math.cos(p), -math.sin(p)])
    up = np.array([0.0, math.sin(p), math.cos(p)])
    right = np.cross(forward, up)
    return right, up, forward


def focal_px() -> float:
    """Focal length in pixels for the square image with FOV_DEG across (vertical = horizontal)."""
    return (IMG / 2.0) / math.tan(math.radians(FOV_DEG) / 2.0)


def pixel_rays() -> np.ndarray:
    """(IMG*IMG, 3) world ray directions through the pixel sample points, scaled so d·forward = 1.

    With this scaling the ray parameter at a hit *is* the z-depth, which is what a depth buffer
    stores. Row 0 is the top of the image, column 0 the left (OpenGL/PyBullet image order).
    """
    right, up, forward = camera_axes()
    f = focal_px()
    cu = (np.arange(IMG) + SAMPLE_COL_OFFSET - IMG / 2.0) / f
    cv = (np.arange(IMG) + SAMPLE_ROW_OFFSET - IMG / 2.0) / f
    u = cu[None, :].repeat(IMG, 0)  # column -> right
    v = -cv[:, None].repeat(IMG, 1)  # row -> down
    d = forward[None, :] + u.reshape(-1, 1) * right[None, :] + v.reshape(-1, 1) * up[None, :]
    return d


def project(points_rel_cam: np.ndarray) -> np.ndarray:
    """Pixel (row, col) indices of points given relative to the camera (..., 3) -> (..., 2) int.

    The pixel whose sample point is nearest to the projection, as DESIGN says "the image
    projection of each primitive's end point".
    """
    right, up, forward = camera_axes()
    z = points_rel_cam @ forward
    col = IMG / 2.0 + focal_px() * (points_rel_cam @ right) / z
    row = IMG / 2.0 - focal_px() * (points_rel_cam @ up) / z
    r = np.floor(row - SAMPLE_ROW_OFFSET + 0.5)
    c = np.floor(col - SAMPLE_COL_OFFSET + 0.5)
    return np.stack([r, c], axis=-1).astype(np.int64)


def primitive_offsets() -> np.ndarray:
    """(25, 2) end offsets (dx, dz); primitive index = 5 * ix + iz over OFFSETS."""
    return np.array([(dx, dz) for dx in OFFSETS for dz in OFFSETS], dtype=np.float64)


def filter_cells() -> np.ndarray:
    """(25, 2) top-left (row, col) of each primitive's 5x5 Depth Filter cell.

    The cell is centred on the pixel holding the primitive's end point seen from the camera at the
    primitive's start, shifted inwards if it would leave the image. Fixed because the robot never
    rotates.
    """
    offs = primitive_offsets()
    cam = np.array(CAM_OFFSET)
    ends = np.stack([offs[:, 0], np.full(25, SPEED * PRIM_DURATION), offs[:, 1]], axis=1) - cam
    rc = project(ends) - CELL // 2
    return np.clip(rc, 0, IMG - CELL)


def tie_break_order() -> np.ndarray:
    """Primitive indices in the order ties are broken: straighter first, then by index.

    Open space reads the far value in many cells at once, so exact ties are common; preferring
    the straightest of the tied primitives is the natural choice and is the same in both
    simulators.
    """
    offs = primitive_offsets()
    key = np.abs(offs).sum(axis=1)
    return np.lexsort((np.arange(25), key))
