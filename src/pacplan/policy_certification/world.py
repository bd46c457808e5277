"""certify-policy's rollouts as a pacplan world (`policy-rollouts`), so its rows run on any
executor (`--workers`, `--executor ray`) with the costs the serial path gives, bit for bit.

A policy "weight vector" here is one number: the index of a policy among `policies`, each a
path or 'module:callable' (Python objects cannot travel to another process and stay in the
driver's serial path). Every worker loads the policies itself and checks each against the
sha256 the driver recorded, so a policy file changed during the command is refused, never
mixed into the matrix.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.policy_certification.inputs import load_policies, make_world_for
from pacplan.policy_certification.names import PYTHON
from pacplan.policy_certification.request import CostOptions
from pacplan.policy_certification.rollout import cost_rows
from pacplan.validation import check_policies, check_seeds

NAME = "pacplan.policy_certification.world:PolicyRollouts"
"""The world's name for `make_world` in a worker: its factory's import path (it is no
registered world: `pacplan.worlds.base.world_entry`)."""


class PolicyRollouts:
    """Rollouts of imported policies on a Gymnasium environment, costed by a declared rule."""

    name = "policy-rollouts"

    def __init__(self, env_id: str, policies: list[str], policy_sha256: list[str],
                 env_kwargs: dict[str, Any] | None = None, costs: dict[str, Any] | None = None,
                 obs_normalization: list[str] | None = None) -> None:
        """`costs`: the request's `CostOptions` given by name (the normalization statistics
        apart, as the driver's [path, sha256] in `obs_normalization`)."""
        options = CostOptions(**(costs or {}))
        self._world, _, _ = make_world_for(env_id, env_kwargs, options, PYTHON)
        self._env = self._world.make_env()
        self._policies = load_policies(policies, self._env.observation_space,
                                       self._env.action_space)
        for p, want in zip(self._policies, policy_sha256, strict=True):
            if p.sha256 != want:
                raise PacplanError(f"policy {p.label} changed while it was being certified "
                                   f"(sha256 {p.sha256[:12]}…, was {want[:12]}…)")
        if obs_normalization is not None:
            from pacplan.policy_certification.normalization import (
                normalized,
                read_obs_normalization,
            )

            path, want = obs_normalization
            norm = read_obs_normalization(path, self._env.observation_space)
            if norm.sha256 != want:
                raise PacplanError(f"{path} changed while it was being certified")
            self._policies = normalized(self._policies, norm)
        self._clip = options.clip_actions

    def policy_dim(self) -> int:
        return 1

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """(n, k) costs of the policies whose indices are `thetas[:, 0]` on `seeds`."""
        th = check_policies(thetas, 1, "policy-rollouts: policy indices")
        index = th[:, 0].astype(np.int64)
        if not (np.array_equal(index, th[:, 0]) and (index >= 0).all()
                and (index < len(self._policies)).all()):
            raise PacplanError(f"policy-rollouts: policy indices must be 0 … "
                               f"{len(self._policies) - 1}, got {th[:, 0].tolist()}")
        chosen = [self._policies[i] for i in index]
        return cost_rows(self._world, self._env, chosen, check_seeds(seeds).tolist(),
                         clip_actions=self._clip)


def world_options(policies: Sequence[Any], sha256: Sequence[str], env_id: Any,
                  env_kwargs: dict[str, Any], costs: CostOptions,
                  normalization: list[str] | None) -> dict[str, Any] | None:
    """The `policy-rollouts` options for these inputs, or None when one of them is a Python
    object (which only the driver's process holds); `normalization` is the observation
    statistics' [path, sha256]."""
    if not isinstance(env_id, str) or not all(isinstance(p, str) for p in policies) \
            or not isinstance(costs.cost, str):
        return None
    given = {"cost": costs.cost, **costs.world_options(),
             **({"clip_actions": True} if costs.clip_actions else {})}
    return {"env_id": env_id, "policies": list(policies), "policy_sha256": list(sha256),
            **({"env_kwargs": env_kwargs} if env_kwargs else {}), "costs": given,
            **({"obs_normalization": normalization} if normalization is not None else {})}
