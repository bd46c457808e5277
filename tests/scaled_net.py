"""A torch policy whose output is scaled by a plain attribute, not a weight (tests of live
objects' identity)."""

from __future__ import annotations

import torch


class ScaledNet(torch.nn.Module):
    """CartPole logits: a linear layer times `scale`."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 2)
        self.scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale
