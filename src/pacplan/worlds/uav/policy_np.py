"""One policy on one image in plain numpy, for the PyBullet reference simulator and the figures.

Same scores as the torch path (policy.py, conv_policy.py), computed independently in float64: a
check on the batched net, and no torch thread pool in the loop of the one-image-at-a-time
simulator. Either policy family (`families`): the paper's net or the conv family.
"""

from __future__ import annotations

import numpy as np

from pacplan.validation import check_policies
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.families import CONV_STRIDE, PAPER_FAMILY, PolicyFamily
from pacplan.worlds.uav.spec import DEFAULT_NET_SCALE


class NumpyPolicy:
    """One policy on one image in plain numpy (float64): used by the PyBullet simulator.

    Tiny single-image convolutions are dominated by thread-pool overhead in torch on a busy
    2-core machine (≈10 ms a call measured here vs 0.05 ms in numpy); being torch-free also keeps
    the reference simulator independent of the batched code path.
    """

    def __init__(self, theta: np.ndarray | None, net_scale: float = DEFAULT_NET_SCALE,
                 family: PolicyFamily = PAPER_FAMILY) -> None:
        tl = spec.filter_cells()
        self.cells = [(int(r), int(c)) for r, c in tl]
        self.order = spec.tie_break_order()
        self.net_scale = float(net_scale)
        self.family = family
        self.w: dict[str, np.ndarray] | None = None
        if theta is not None:
            one = np.asarray(theta).reshape(1, -1)
            flat = check_policies(one, family.dim, "UAV policy weights").astype(np.float64)
            self.w = {name: v[0] for name, v in family.split(flat).items()}

    def filter_scores(self, image: np.ndarray) -> np.ndarray:
        """(25,) mean depth of each primitive's 5x5 cell."""
        c = spec.CELL
        return np.array([image[r : r + c, q : q + c].mean() for r, q in self.cells])

    def net_scores(self, image: np.ndarray) -> np.ndarray:
        """(25,) residual-net output in [-1, 1] (zeros without a net)."""
        if self.w is None:
            return np.zeros(spec.N_PRIMS)
        if not self.family.is_paper:
            return conv_net_scores(self.w, image)
        w = self.w
        x = np.asarray(image, dtype=np.float64) / spec.FAR
        win = np.lib.stride_tricks.sliding_window_view(x, (4, 4))[::2, ::2]  # (24, 24, 4, 4)
        h = np.einsum("ijab,oab->oij", win, w["conv1.weight"][:, 0])
        h = _elu(h + w["conv1.bias"][:, None, None])
        win = np.lib.stride_tricks.sliding_window_view(h, (2, 2), axis=(1, 2))  # (2, 23, 23, 2, 2)
        h = np.einsum("cijab,cab->ij", win, w["conv2.weight"][0]) + w["conv2.bias"][0]
        h = _elu(h.reshape(-1))
        h = _elu(w["fc1.weight"] @ h + w["fc1.bias"])
        return np.tanh(w["fc2.weight"] @ h + w["fc2.bias"])

    def scores(self, image: np.ndarray) -> np.ndarray:
        return self.filter_scores(image) + self.net_scale * self.net_scores(image)

    def choose(self, image: np.ndarray) -> int:
        """Best primitive, ties toward the straighter one (same rule as `choose`)."""
        s = self.scores(image)
        return int(self.order[int(np.argmax(s[self.order]))])


def conv_net_scores(w: dict[str, np.ndarray], image: np.ndarray) -> np.ndarray:
    """(25,) conv family net output (`conv_policy.ConvNet`) on one image, float64."""
    x = np.asarray(image, dtype=np.float64) / spec.FAR
    h = _conv(x[None], w["conv1.weight"], w["conv1.bias"])
    h = _conv(_elu(h), w["conv2.weight"], w["conv2.bias"])
    h = _elu(w["fc1.weight"] @ _elu(h).reshape(-1) + w["fc1.bias"])
    return np.tanh(w["fc2.weight"] @ h + w["fc2.bias"])


def _conv(x: np.ndarray, weight: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """Valid stride-2 cross-correlation (torch's Conv2d): x (C, H, W), weight (O, C, k, k) ->
    (O, H', W')."""
    k = weight.shape[-1]
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))
    win = win[:, ::CONV_STRIDE, ::CONV_STRIDE]  # (C, H', W', k, k)
    out = np.tensordot(weight, win, axes=([1, 2, 3], [0, 3, 4]))  # (O, H', W')
    return out + bias[:, None, None]


def _elu(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))
