"""Certify policies trained elsewhere (Stable-Baselines3, ONNX, your own Python) on a
Gymnasium environment: `pacplan certify-policy`, or `certify_policy` from Python.

The names below are imported when first used, so the command line's start stays quick. The
package is also the front door's `pacplan.certify_policy(env_id, policies, n=..., out=...)`
(`certify.certify_policy`), callable itself (`pacplan.callable_package`).
"""

from __future__ import annotations

from typing import Any

from pacplan.callable_package import make_callable

__all__ = ["DEFAULT_FIRST_SEED", "PolicyCertification", "certify_policy"]


def __getattr__(name: str) -> Any:
    if name in ("PolicyCertification", "certify_policy"):
        from pacplan.certify_policy import certify

        return getattr(certify, name)
    if name == "DEFAULT_FIRST_SEED":
        from pacplan.certify_policy.seeds import DEFAULT_FIRST_SEED

        return DEFAULT_FIRST_SEED
    raise AttributeError(f"module 'pacplan.certify_policy' has no attribute {name!r}")


make_callable(__name__, "pacplan.certify_policy.certify:certify_policy",
              "`certify_policy(env_id, policies, *, n, out, ...)`: roll the policies out on fresh "
              "seeds and certify them (`pacplan.certify_policy.certify.certify_policy`).")
