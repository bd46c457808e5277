"""The policy: a fixed Depth Filter plus a residual net whose 13,943 weights are θ.

Score of primitive j = DepthFilter_j(image) + net_scale · Net_j(image / FAR); the best score is
flown, ties broken toward the straighter primitive (spec.tie_break_order). The net sees depth
divided by the far value so its inputs lie in [0, 1] whatever the far value; the Depth Filter
scores are in metres.

Default net_scale = 5 m: the net's Tanh output is in [-1, 1], so a saturated net shifts a score
by at most ±5 m. It can therefore reorder primitives whose cells differ by less than 10 m (pick a
side gap over a long straight view, or the reverse) but it can never prefer a cell that is more
than 10 m shallower than the best one: an obstacle 1 m ahead stays vetoed whenever another cell
sees more than 11 m of free space. Smaller scales make θ nearly irrelevant (the filter decides
almost everything, so the PAC-Bayes prior has nothing to learn); larger ones let an untrained
net fly straight into obstacles.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pacplan.validation import check_policies
from pacplan.worlds.uav import spec

DEFAULT_NET_SCALE = spec.DEFAULT_NET_SCALE
NET_SHAPES = spec.NET_SHAPES
POLICY_DIM = spec.POLICY_DIM


class ResidualNet(nn.Module):
    """The residual net (docs/design.md §4.4) for one policy: the batched version's reference."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 2, kernel_size=4, stride=2)
        self.conv2 = nn.Conv2d(2, 1, kernel_size=2, stride=1)
        self.fc1 = nn.Linear(529, 25)
        self.fc2 = nn.Linear(25, 25)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, 1, 50, 50) normalised depth -> (B, 25) in [-1, 1]."""
        x = F.elu(self.conv1(x))
        x = F.elu(self.conv2(x))
        x = F.elu(self.fc1(x.flatten(1)))
        return torch.tanh(self.fc2(x))

    def load_flat(self, theta: np.ndarray | torch.Tensor) -> ResidualNet:
        """Set the weights from a flat θ of length 13,943 (layout NET_SHAPES)."""
        parts = split_theta(torch.as_tensor(np.asarray(theta, dtype=np.float32))[None])
        with torch.no_grad():
            for name, p in self.named_parameters():
                p.copy_(parts[name][0])
        return self


def flatten_net(net: nn.Module, shapes: tuple[tuple[str, tuple[int, ...]], ...] = NET_SHAPES
                ) -> np.ndarray:
    """The flat θ of a net in the layout `shapes` (default the paper net's: the inverse of
    ResidualNet.load_flat; a policy family's `shapes` for its module)."""
    sd = net.state_dict()
    return np.concatenate([sd[name].detach().cpu().numpy().ravel() for name, _ in shapes])


def split_theta(thetas: torch.Tensor) -> dict[str, torch.Tensor]:
    """(k, 13943) -> {name: (k, *shape)} views, following NET_SHAPES (1-D θ: k = 1).

    Checked by `pacplan.validation.check_policies` (shape and finite weights; PacplanError), on a
    host view of the weights: no copy on CPU, one small copy per call on CUDA.
    """
    check_policies(thetas.detach().cpu().numpy(), POLICY_DIM, "UAV policy weights")
    thetas = thetas.reshape(-1, POLICY_DIM)
    out: dict[str, torch.Tensor] = {}
    i = 0
    for name, shape in NET_SHAPES:
        n = int(np.prod(shape))
        out[name] = thetas[:, i : i + n].reshape(thetas.shape[0], *shape)
        i += n
    return out


class FilterCells:
    """Gathers the 25 Depth Filter cells; built once per device.

    top_left (25, 2): other cells than `spec.filter_cells()` (the paper's grid, to fly its
    prior as it was flown: `paper_prior.paper_filter_cells`).
    """

    def __init__(self, device: torch.device | str = "cpu",
                 top_left: np.ndarray | None = None) -> None:
        tl = spec.filter_cells() if top_left is None else np.asarray(top_left, dtype=np.int64)
        r = tl[:, 0:1] + np.arange(spec.CELL)[None, :]  # (25, 5)
        c = tl[:, 1:2] + np.arange(spec.CELL)[None, :]
        flat = (r[:, :, None] * spec.IMG + c[:, None, :]).reshape(25, -1)  # (25, 25 pixels)
        self.index = torch.as_tensor(flat, device=device)

    def scores(self, images: torch.Tensor) -> torch.Tensor:
        """images (..., 50, 50) metres -> (..., 25) mean depth of each primitive's cell."""
        flat = images.reshape(*images.shape[:-2], spec.IMG * spec.IMG)
        return flat[..., self.index].mean(dim=-1)


def conv_features(
    images: torch.Tensor,  # (R, 50, 50) metres
    w1: torch.Tensor,  # (R, 2, 4, 4)
    b1: torch.Tensor,  # (R, 2)
    w2: torch.Tensor,  # (R, 2, 2, 2)
    b2: torch.Tensor,  # (R,)
) -> torch.Tensor:
    """The two conv layers (+ ELU) with a different weight set per image -> (R, 529).

    Written as explicit taps (16 + 8 strided multiply-adds) instead of a grouped convolution:
    torch.compile fuses it into one loop that reads each image once, 5-6x faster than oneDNN's
    grouped conv with 1-2 channels per group measured here; eager it is about as fast.
    """
    x = images / spec.FAR
    hidden = []
    for c in range(2):
        acc = b1[:, c, None, None]
        for a in range(4):
            for b in range(4):
                acc = acc + w1[:, c, a, b, None, None] * x[:, a : a + 47 : 2, b : b + 47 : 2]
        hidden.append(F.elu(acc))  # (R, 24, 24)
    acc = b2[:, None, None]
    for c in range(2):
        for a in range(2):
            for b in range(2):
                acc = acc + w2[:, c, a, b, None, None] * hidden[c][:, a : a + 23, b : b + 23]
    return F.elu(acc).reshape(-1, 529)


def head(features: torch.Tensor, parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """features (B, k, 529) -> (B, k, 25) through policy j's two linear layers for column j."""
    x = F.elu(torch.einsum("bki,koi->bko", features, parts["fc1.weight"]) + parts["fc1.bias"])
    return torch.tanh(torch.einsum("bki,koi->bko", x, parts["fc2.weight"]) + parts["fc2.bias"])


def conv_weights(parts: dict[str, torch.Tensor], policy: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Per-item conv weights (w1, b1, w2, b2) for items using policies `policy` (R,)."""
    return (
        parts["conv1.weight"][policy, :, 0],
        parts["conv1.bias"][policy],
        parts["conv2.weight"][policy, 0],
        parts["conv2.bias"][policy, 0],
    )


def net_scores_grouped(images: torch.Tensor, parts: dict[str, torch.Tensor]) -> torch.Tensor:
    """images (B, k, 50, 50) in metres, parts from split_theta (k policies) -> (B, k, 25).

    images[b, j] is scored by policy j.
    """
    b, k = images.shape[:2]
    policy = torch.arange(k, device=images.device).repeat(b)
    feats = conv_features(images.reshape(b * k, spec.IMG, spec.IMG), *conv_weights(parts, policy))
    return head(feats.reshape(b, k, 529), parts)


def choose(scores: torch.Tensor) -> torch.Tensor:
    """Index of the best primitive along the last axis, ties toward the straighter primitive."""
    order = torch.as_tensor(spec.tie_break_order(), device=scores.device)
    return order[scores[..., order].argmax(dim=-1)]
