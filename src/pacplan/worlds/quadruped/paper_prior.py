"""The paper's published Minitaur prior walked by pacplan's policy: a yardstick for our prior.

The paper's net (`policy/minitaur_policy.py`, `Policy`) has pacplan's layers, weight order and
inputs (944 weights: conv 1→2 k5 s5 + tanh on depth in metres, then Linear(222→4) + sigmoid on
the features and the raw 22 proprioceptive values in the same order). One thing differs: the
order of its 4 outputs. The paper's code (`envs/Minitaur_Env.py`, `execute_policy`) reads
η₀ → a1, η₁ → a2, η₂ → steering a_st, η₃ → speed ω, where pacplan's world (DESIGN.md §5) reads
η₃ → ω and η₄ → a_st (1-based). The maps themselves agree (a = 0.8η + 0.2, ω = 20η + 20, a_st
capped at 1 − a1 and 1 − a2), so swapping the last layer's rows 2 and 3 makes pacplan's policy
choose exactly the gait the paper's would.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped.policy import N_FEATURES, N_OUT, N_PROPRIO, POLICY_DIM

PRIOR_NAMES = ("mu_minitaur_best.npy", "logvar_minitaur_best.npy")
PAPER_TO_PACPLAN_OUTPUTS = (0, 1, 3, 2)
"""pacplan's output i is the paper's output PAPER_TO_PACPLAN_OUTPUTS[i]."""


def from_paper_layout(theta: np.ndarray) -> np.ndarray:
    """(…, 944) weights in the paper's layout -> pacplan's (any per-weight array: μ, log σ²)."""
    flat = np.asarray(theta)
    if flat.shape[-1] != POLICY_DIM:
        raise PacplanError(f"the paper's Minitaur net has {POLICY_DIM} weights, got "
                           f"{flat.shape[-1]}")
    order = list(PAPER_TO_PACPLAN_OUTPUTS)
    n_in = N_FEATURES + N_PROPRIO  # 222 inputs per output
    w0 = POLICY_DIM - N_OUT * (n_in + 1)  # the last layer: weights (4, 222), then biases (4,)
    lead = flat.shape[:-1]
    weights = flat[..., w0:w0 + N_OUT * n_in].reshape(*lead, N_OUT, n_in)[..., order, :]
    biases = flat[..., POLICY_DIM - N_OUT:][..., order]
    return np.concatenate([flat[..., :w0], weights.reshape(*lead, N_OUT * n_in), biases],
                          axis=-1)


def load_paper_prior(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(μ, log σ²) float64 in pacplan's layout, from `pacplan data paper`'s folder."""
    mu, logvar = _load_paper_layout(folder)
    return from_paper_layout(mu), from_paper_layout(logvar)


def _load_paper_layout(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    paths = [folder / name for name in PRIOR_NAMES]
    for path in paths:
        if not path.is_file():
            raise PacplanError(f"{path} is missing: run `pacplan data paper`")
    mu, logvar = (np.load(p, allow_pickle=False) for p in paths)
    return mu, logvar


def paper_draws(folder: Path, m: int = 10, seed: int = 0) -> np.ndarray:
    """(m, 944) float32 policies in pacplan's layout, drawn as the paper's cost-matrix code drew
    them: `torch.manual_seed(seed)`, one (m, 944) block of standard normals ε, μ + exp(½ log σ²)·ε
    in float32 in the paper's layout, then relabelled (`from_paper_layout`). Needs torch."""
    import torch

    mu, logvar = _load_paper_layout(folder)
    gen = torch.Generator().manual_seed(seed)  # the stream torch.manual_seed(seed) gives
    eps = torch.randn((m, POLICY_DIM), generator=gen)
    mu_t = torch.as_tensor(np.asarray(mu, np.float32))
    std = (0.5 * torch.as_tensor(np.asarray(logvar, np.float32))).exp()
    return from_paper_layout((mu_t + std * eps).numpy()).astype(np.float32)
