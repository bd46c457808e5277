"""The UAV policy families: which residual net θ parametrises, its size and its flat layout.

Every family has the same form (policy.py): score_j = DepthFilter_j(image) + net_scale ·
net_j(image / FAR), 25 tanh outputs, the same tie-break. Only the net differs:

- `paper` (default): the paper's 13,943-weight net (spec.NET_SHAPES), kept bit for bit for
  the comparisons with the paper (uav-es, the shipped priors, every pinned result).
- `conv`: a wider convnet (the paper's net is the taught student's limit: docs/results.md),
  Conv(1→w, k4, s2) → ELU → Conv(w→2w, k4, s2) → ELU → flatten (2w·11·11) → fc → 128 → ELU →
  fc → 25 → tanh, sized by the world option `policy_width` w, one of CONV_WIDTHS:

      w:       1       2        4        8        16
      weights: 34,380  65,471   127,845  253,361  507,465

  (w = 4 is the default: on the same teacher labels it flew as well as w = 8 and faster,
  benchmarks/uav_student_capacity.py and docs/results.md; w = 1 is small enough for fast
  tests.) Most weights sit in the first linear layer, whose cost per decision
  is one multiply-add per weight, so capacity grows faster than rollout time.

The flat θ follows the torch state_dict order of the family's reference module, as the paper's
does. Torch-free: export, the runtime's checks and the numpy path read this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.validation import check_choice
from pacplan.worlds.uav import spec

PAPER = "paper"
CONV = "conv"
POLICIES = (PAPER, CONV)
CONV_WIDTHS = (1, 2, 4, 8, 16)
CONV_DEFAULT_WIDTH = 4
CONV_HIDDEN = 128  # the first linear layer's outputs
CONV_KERNEL = 4  # both conv layers: 4 × 4, stride 2
CONV_STRIDE = 2
CONV_SIDE1 = (spec.IMG - CONV_KERNEL) // CONV_STRIDE + 1  # 24
CONV_SIDE2 = (CONV_SIDE1 - CONV_KERNEL) // CONV_STRIDE + 1  # 11

Shapes = tuple[tuple[str, tuple[int, ...]], ...]


def conv_shapes(width: int) -> Shapes:
    """The conv family's weight tensors (name, shape) in flat-θ order (state_dict order)."""
    w2 = 2 * width
    features = w2 * CONV_SIDE2 * CONV_SIDE2
    k = CONV_KERNEL
    return (
        ("conv1.weight", (width, 1, k, k)),
        ("conv1.bias", (width,)),
        ("conv2.weight", (w2, width, k, k)),
        ("conv2.bias", (w2,)),
        ("fc1.weight", (CONV_HIDDEN, features)),
        ("fc1.bias", (CONV_HIDDEN,)),
        ("fc2.weight", (spec.N_PRIMS, CONV_HIDDEN)),
        ("fc2.bias", (spec.N_PRIMS,)),
    )


@dataclass(frozen=True)
class PolicyFamily:
    """One policy family: `name` (paper or conv) and, for conv, its `width`."""

    name: str = PAPER
    width: int | None = None

    @property
    def shapes(self) -> Shapes:
        return spec.NET_SHAPES if self.name == PAPER else conv_shapes(int(self.width or 0))

    @property
    def dim(self) -> int:
        """Number of weights in θ."""
        return int(sum(int(np.prod(s)) for _, s in self.shapes))

    @property
    def is_paper(self) -> bool:
        return self.name == PAPER

    def label(self) -> str:
        """How refusals name the family, e.g. "policy conv, policy_width 8"."""
        if self.is_paper:
            return "policy paper"
        return f"policy conv, policy_width {self.width}"

    def options(self) -> dict[str, Any]:
        """The world options that select this family."""
        return {"policy": self.name, "policy_width": self.width}

    def split(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """(k, dim) flat θ -> {name: (k, *shape)} views in the family's layout."""
        flat = np.asarray(flat)
        out, i = {}, 0
        for name, shape in self.shapes:
            n = int(np.prod(shape))
            out[name] = flat[:, i : i + n].reshape(flat.shape[0], *shape)
            i += n
        return out


PAPER_FAMILY = PolicyFamily()


def policy_family(policy: str = PAPER, policy_width: int | None = None) -> PolicyFamily:
    """The family the world options `policy` and `policy_width` select; refused in one line
    naming the option and its allowed values."""
    check_choice("UAV world option policy", policy, POLICIES)
    if policy == PAPER:
        if policy_width is not None:
            raise PacplanError(f"UAV world option policy_width applies to policy: conv only "
                               f"(the paper's net has one size), got {policy_width!r}")
        return PAPER_FAMILY
    width = CONV_DEFAULT_WIDTH if policy_width is None else policy_width
    if isinstance(width, bool) or width not in CONV_WIDTHS:
        allowed = ", ".join(str(w) for w in CONV_WIDTHS)
        raise PacplanError(f"UAV world option policy_width must be one of {allowed} "
                           f"(policy: conv), got {width!r}")
    return PolicyFamily(CONV, int(width))
