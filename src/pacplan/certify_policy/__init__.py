"""Certify policies trained elsewhere (Stable-Baselines3, ONNX, your own Python) on a
Gymnasium environment: `pacplan certify-policy`, or `certify_policy` from Python.

The names below are imported when first used, so the command line's start stays quick.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_FIRST_SEED", "PolicyCertification", "certify_policy"]


def __getattr__(name: str) -> Any:
    if name in ("PolicyCertification", "certify_policy"):
        from pacplan.certify_policy import certify

        return getattr(certify, name)
    if name == "DEFAULT_FIRST_SEED":
        from pacplan.certify_policy.seeds import DEFAULT_FIRST_SEED

        return DEFAULT_FIRST_SEED
    raise AttributeError(f"module 'pacplan.certify_policy' has no attribute {name!r}")
