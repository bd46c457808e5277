"""The 944-weight quadruped policy, evaluated in numpy (one small forward pass per primitive).

depth (1×50×50) → Conv(1→2, kernel 5, stride 5) → tanh → 200 features, concatenated with the 22
proprioceptive values → Linear(222→4) → sigmoid = η. The flat weight vector is laid out like the
parameters of the equivalent torch module, in order: conv.weight (2,1,5,5), conv.bias (2),
linear.weight (4,222), linear.bias (4); features are flattened channel-major (torch `view`).
numpy avoids importing torch in every rollout worker and is faster for a net this small.
"""

from __future__ import annotations

import numpy as np

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped.gait import GaitParams

IMAGE_SIZE = 50
KERNEL = 5
CHANNELS = 2
N_PROPRIO = 22
N_FEATURES = CHANNELS * (IMAGE_SIZE // KERNEL) ** 2  # 200
N_OUT = 4
_SIZES = (
    ("conv_w", (CHANNELS, 1, KERNEL, KERNEL)),
    ("conv_b", (CHANNELS,)),
    ("lin_w", (N_OUT, N_FEATURES + N_PROPRIO)),
    ("lin_b", (N_OUT,)),
)
POLICY_DIM = sum(int(np.prod(shape)) for _, shape in _SIZES)  # 944


def unpack(theta: np.ndarray) -> dict[str, np.ndarray]:
    """Split a flat (944,) weight vector into named float64 arrays."""
    flat = np.asarray(theta, dtype=np.float64).reshape(-1)
    if flat.size != POLICY_DIM:
        raise PacplanError(f"quadruped policy needs {POLICY_DIM} weights, got {flat.size}")
    out: dict[str, np.ndarray] = {}
    pos = 0
    for name, shape in _SIZES:
        n = int(np.prod(shape))
        out[name] = flat[pos : pos + n].reshape(shape)
        pos += n
    return out


def depth_features(weights: dict[str, np.ndarray], depth: np.ndarray) -> np.ndarray:
    """Conv(1→2, k5, s5) + tanh on a (50, 50) image -> (200,) features, channel-major."""
    cells = IMAGE_SIZE // KERNEL
    patches = np.asarray(depth, dtype=np.float64).reshape(cells, KERNEL, cells, KERNEL)
    conv = (
        np.einsum("ikjl,ckl->cij", patches, weights["conv_w"][:, 0])
        + weights["conv_b"][:, None, None]
    )
    return np.tanh(conv).reshape(-1)


def policy_output(theta: np.ndarray, depth: np.ndarray, proprio: np.ndarray) -> np.ndarray:
    """η ∈ (0, 1)^4 for one observation: depth (50, 50) metres, proprio (22,)."""
    w = unpack(theta)
    x = np.concatenate([depth_features(w, depth), np.asarray(proprio, dtype=np.float64)])
    z = w["lin_w"] @ x + w["lin_b"]
    return 0.5 * (1.0 + np.tanh(0.5 * z))  # sigmoid without overflow warnings


def policy_action(theta: np.ndarray, depth: np.ndarray, proprio: np.ndarray) -> np.ndarray:
    """η as a float32 action (the Gymnasium environment's action type), observations taken
    through float32 as the environment delivers them, so both adapters see the same numbers."""
    eta = policy_output(
        theta, np.asarray(depth, dtype=np.float32), np.asarray(proprio, dtype=np.float32)
    )
    return eta.astype(np.float32)


def gait_theta(params: GaitParams, eta_floor: float = 0.0025) -> np.ndarray:
    """(944,) weights whose policy runs the gait `params` whatever it sees.

    Every weight is zero but the final biases, set to the logits of the η that
    `GaitParams.from_policy_output` maps to `params` (η kept in [floor, 1 − floor], so a_st = 0
    becomes a_st = floor). A starting mean for ES: training then begins at a gait that walks
    instead of at a random network, and the depth and proprioceptive weights start neutral.
    """
    eta = params.policy_output()
    if np.any(eta < 0.0) or np.any(eta > 1.0):
        raise PacplanError(f"{params} is outside the gaits the policy can output")
    eta = np.clip(eta, eta_floor, 1.0 - eta_floor)
    theta = np.zeros(POLICY_DIM)
    theta[-N_OUT:] = np.log(eta / (1.0 - eta))
    return theta
