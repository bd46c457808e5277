"""Certify policies trained elsewhere (Stable-Baselines3, ONNX, your own Python) on a
Gymnasium environment: `pacplan certify-policy`, or the front door's
`pacplan.certify_policy(env_id, policies, n=..., out=...)` (`certify.certify_policy`).

Why this name: the package is the machinery of certifying policies (their inputs, rollouts,
folder and report), and the front-door function `pacplan.certify_policy` is one thing in it.
Were the package called `certify_policy`, importing any of its modules would set the attribute
`pacplan.certify_policy` to the package and hide the function. Until 0.2 it was
`pacplan.certify_policy`; an import path recorded under that name still resolves
(`pacplan.io.renamed`).

The names below are imported when first used, so the command line's start stays quick.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_FIRST_SEED", "PolicyCertification", "certify_policy"]


def __getattr__(name: str) -> Any:
    if name in ("PolicyCertification", "certify_policy"):
        from pacplan.policy_certification import certify

        return getattr(certify, name)
    if name == "DEFAULT_FIRST_SEED":
        from pacplan.policy_certification.seeds import DEFAULT_FIRST_SEED

        return DEFAULT_FIRST_SEED
    raise AttributeError(f"module 'pacplan.policy_certification' has no attribute {name!r}")
