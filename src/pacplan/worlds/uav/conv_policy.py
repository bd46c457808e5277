"""The conv policy family's net in torch (`families.CONV`): its reference module and the batched
simulator's kernel.

Same form as the paper's net (policy.py): score_j = DepthFilter_j(image) + net_scale ·
net_j(image / FAR), ties toward the straighter primitive; only the net is larger.

The batched kernel (`conv_scores`) runs each policy's (env, policy) pairs through plain
`F.conv2d` / `F.linear` in batches of exactly NET_BATCH images (padded), one policy at a time.
Why a fixed batch: a convolution's or matrix product's float result for one image can depend on
the batch shape (the library picks its algorithm and blocking by shape), and the costs must not
depend on how many environments a chunk holds, how many are still flying, or how many workers
share the matrix. With one shape every image of a policy goes through the same computation,
wherever it sits in whichever chunk (tests/worlds/uav/test_conv_policy.py checks chunk and
worker invariance). The ops are device-agnostic (CPU or CUDA) and eager: `compile` fuses the
renderer and the paper's net only.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pacplan.validation import check_policies
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.families import (
    CONV_HIDDEN,
    CONV_KERNEL,
    CONV_SIDE2,
    CONV_STRIDE,
    PolicyFamily,
)

NET_BATCH = 32
"""Images per net call (padded to it): one static shape. 32 is the default env_chunk, so a
policy's living rollouts of a chunk take one call per step; per image it was about 1.6× faster
than 8 and 1.2× faster than 16 (width 8, one thread, measured here)."""


class ConvNet(nn.Module):
    """The conv family's net for one policy: the reference the batched kernel, the numpy path
    and the ONNX export are tested against (layout `families.conv_shapes`)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        w2 = 2 * width
        self.conv1 = nn.Conv2d(1, width, kernel_size=CONV_KERNEL, stride=CONV_STRIDE)
        self.conv2 = nn.Conv2d(width, w2, kernel_size=CONV_KERNEL, stride=CONV_STRIDE)
        self.fc1 = nn.Linear(w2 * CONV_SIDE2 * CONV_SIDE2, CONV_HIDDEN)
        self.fc2 = nn.Linear(CONV_HIDDEN, spec.N_PRIMS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, 1, 50, 50) normalised depth -> (B, 25) in [-1, 1]."""
        x = F.elu(self.conv1(x))
        x = F.elu(self.conv2(x))
        x = F.elu(self.fc1(x.flatten(1)))
        return torch.tanh(self.fc2(x))

    def load_flat(self, theta: np.ndarray | torch.Tensor) -> ConvNet:
        """Set the weights from a flat θ in the family's layout."""
        dim = sum(p.numel() for p in self.parameters())
        flat = torch.as_tensor(check_policies(np.asarray(theta), dim, "UAV policy weights")[0])
        i = 0
        with torch.no_grad():
            for p in self.parameters():  # state_dict order = families.conv_shapes order
                p.copy_(flat[i : i + p.numel()].reshape(p.shape))
                i += p.numel()
        return self


def split_thetas(thetas: torch.Tensor, family: PolicyFamily) -> dict[str, torch.Tensor]:
    """(k, dim) -> {name: (k, *shape)} views in `family`'s layout (1-D θ: k = 1), checked by
    `check_policies` (shape and finite weights; PacplanError) on a host view."""
    check_policies(thetas.detach().cpu().numpy(), family.dim, "UAV policy weights")
    thetas = thetas.reshape(-1, family.dim)
    out: dict[str, torch.Tensor] = {}
    i = 0
    for name, shape in family.shapes:
        n = int(np.prod(shape))
        out[name] = thetas[:, i : i + n].reshape(thetas.shape[0], *shape)
        i += n
    return out


def forward(x: torch.Tensor, w: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """One policy's net on x (B, 1, 50, 50) normalised depth -> (B, 25): `ConvNet.forward`'s
    ops on weights `w` (name -> tensor of the module's shapes)."""
    h = F.elu(F.conv2d(x, w["conv1.weight"], w["conv1.bias"], stride=CONV_STRIDE))
    h = F.elu(F.conv2d(h, w["conv2.weight"], w["conv2.bias"], stride=CONV_STRIDE))
    h = F.elu(F.linear(h.flatten(1), w["fc1.weight"], w["fc1.bias"]))
    return torch.tanh(F.linear(h, w["fc2.weight"], w["fc2.bias"]))


def conv_scores(images: torch.Tensor, frame: torch.Tensor, policy: torch.Tensor,
                parts: Mapping[str, torch.Tensor], batch: int = NET_BATCH) -> torch.Tensor:
    """Net outputs (R, 25) of R (frame, policy) pairs: images (U, 50, 50) metres, frame (R,)
    indices into images, policy (R,) indices into parts' k policies.

    Pairs are grouped by policy and run `batch` images per call, the last call padded with
    copies of its first image, so every call has one shape (see the module docstring).
    """
    r = frame.shape[0]
    out = torch.empty(r, spec.N_PRIMS, dtype=images.dtype, device=images.device)
    if r == 0:
        return out
    x = images / spec.FAR
    k = next(iter(parts.values())).shape[0]
    order = torch.argsort(policy, stable=True)
    counts = torch.bincount(policy, minlength=k).tolist()
    start = 0
    for j, c in enumerate(counts):
        if c == 0:
            continue
        rows, start = order[start : start + c], start + c
        w = {name: v[j] for name, v in parts.items()}
        for s in range(0, c, batch):
            sub = rows[s : s + batch]
            m = sub.shape[0]
            f = frame[sub]
            if m < batch:
                f = torch.cat([f, f[:1].expand(batch - m)])
            out[sub] = forward(x[f][:, None], w)[:m]
    return out
