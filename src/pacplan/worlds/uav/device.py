"""Which torch device the batched UAV simulator runs on, checked before any tensor is made."""

from __future__ import annotations

import torch

from pacplan.errors import PacplanError


def resolve_device(name: str) -> torch.device:
    """`name` (cpu, cuda, cuda:N or auto: CUDA where torch sees it) as a torch device, or one
    line saying why this machine cannot run it (torch's own "not compiled with CUDA" is an
    assertion from deep inside the first tensor made there)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(name)
    if device.type == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise PacplanError(f"UAV device {name!r}: this torch {torch.__version__} sees no "
                               "CUDA device; use device: cpu (or auto)")
        if device.index is not None and device.index >= count:
            raise PacplanError(f"UAV device {name!r}: this machine has {count} CUDA "
                               f"device(s), cuda:0 to cuda:{count - 1}")
    return device
