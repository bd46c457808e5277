"""The m policies a run draws from its prior, the same bits on any x86-64 CPU.

θ_j = μ + σ ⊙ z_j with z from NumPy's PCG64 generator seeded by `policies.seed` (its normal
draws are integer arithmetic and tables, identical everywhere) and σ = exp(logvar / 2) from
`pacplan.portable` (not the platform's libm, whose exp differs in the last bit between CPUs),
in float64, stored as float32. So `policies.npy` is a function of the prior, m and the seed:
a shipped run may leave it out and have it drawn again, checked against its recorded sha256.
"""

from __future__ import annotations

import numpy as np

from pacplan import portable


def draw_policies(mu: np.ndarray, logvar: np.ndarray, m: int, seed: int) -> np.ndarray:
    """The (m, d) float32 policies drawn from the prior N(mu, diag(exp(logvar)))."""
    rng = np.random.default_rng(seed)
    sigma = portable.exp(0.5 * logvar.astype(np.float64))
    thetas = mu.astype(np.float64) + sigma * rng.standard_normal((m, mu.size))
    return thetas.astype(np.float32)
