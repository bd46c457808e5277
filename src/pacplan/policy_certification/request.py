"""What one certify-policy command asks for, as one typed object checked when it is built.

The command line (`pacplan certify-policy`) and Python (`pacplan.certify_policy(...)`) both
build a `CertifyRequest`, with their own `Names` (how their user spells each argument), and
hand it to `pacplan.policy_certification.certify.certify`; its internal steps take the request, not
its arguments one by one. What can be checked without the environment or the user's code is
checked here, before any folder or rollout, in one line in the caller's spelling: the seeds,
δ, the flags, paths, where rollouts run and the declared horizon and return bounds. What needs
the environment (its spaces, its episode limit) is checked when its world is built.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pacplan.errors import PacplanError
from pacplan.policy_certification.names import PYTHON, Names
from pacplan.policy_certification.seeds import DEFAULT_FIRST_SEED, DEFAULT_N, seed_ranges
from pacplan.validation import check_delta, check_flag, check_int, check_real


@dataclass(frozen=True)
class CostOptions:
    """How an episode is rolled out and becomes a cost: the rule and its bounds (the `gym`
    world's options), and what the policies see and may do (normalized observations,
    clipped actions)."""

    cost: Any = "return"
    success_key: str | None = None
    success_needs_terminated: bool = False
    return_bounds: Sequence[float] | None = None
    reward_bounds: Sequence[float] | None = None
    horizon: int | None = None
    clip_actions: bool = False
    obs_normalization: str | os.PathLike[str] | None = None

    def world_options(self) -> dict[str, Any]:
        """The `gym` world's options among these (its cost rule, bounds and horizon), as
        given: tuples as lists, the unset ones left out."""
        given = {"success_key": self.success_key, "return_bounds": self.return_bounds,
                 "reward_bounds": self.reward_bounds, "horizon": self.horizon}
        options = {k: (list(v) if isinstance(v, tuple) else v) for k, v in given.items()
                   if v is not None}
        if self.success_needs_terminated:
            options["success_needs_terminated"] = True
        return options


@dataclass(frozen=True)
class CertifyRequest:
    """One certify-policy command's inputs, checked (`__post_init__`); `seeds` is derived."""

    env_id: Any
    policies: Sequence[Any]
    n: int = DEFAULT_N
    test_n: int = 0
    first_seed: int = DEFAULT_FIRST_SEED
    train_seeds: Sequence[int] | None = None
    out: str | os.PathLike[str] | None = None
    env_kwargs: Mapping[str, Any] | None = None
    costs: CostOptions = field(default_factory=CostOptions)
    delta: float = 0.01
    workers: int = 1
    executor: str = "serial"
    progress: bool = False
    log: Callable[[str], None] | None = field(default=None, compare=False)
    names: Names = field(default=PYTHON, compare=False)
    """How the caller spells each argument (messages only: not what is certified)."""
    seeds: dict[str, list[int] | None] = field(init=False, compare=False)
    """The certification, test and declared training seed ranges [start, stop)."""

    def __post_init__(self) -> None:
        names = self.names
        if not isinstance(names, Names):
            raise PacplanError(f"names must be a pacplan.policy_certification.names.Names, got "
                               f"{type(names).__name__}")
        if self.log is not None and not callable(self.log):
            raise PacplanError(f"log must be a function of one message (or None), got "
                               f"{type(self.log).__name__}")
        check_delta(check_real(self.delta, names.delta), names.delta)
        c = self.costs
        for flag, value in (("success_needs_terminated", c.success_needs_terminated),
                            ("clip_actions", c.clip_actions), ("progress", self.progress)):
            check_flag(value, names.spelling(flag))
        for name, value in (("out", self.out), ("obs_normalization", c.obs_normalization)):
            if value is not None and not isinstance(value, str | os.PathLike):
                raise PacplanError(f"{names.spelling(name)} must be a path (a str or "
                                   f"os.PathLike), got {type(value).__name__}")
        object.__setattr__(self, "seeds", seed_ranges(self.n, self.test_n, self.first_seed,
                                                      self.train_seeds, names))
        object.__setattr__(self, "train_seeds", self.seeds["train"])  # a list, as checked
        if self.out is not None:
            object.__setattr__(self, "out", Path(self.out))
        policies = self.policies
        if isinstance(policies, str | os.PathLike) or not isinstance(policies, Sequence) \
                or not policies:
            raise PacplanError("give one or more policies (a list of paths of SB3 .zip or "
                               ".onnx files, 'module:callable' or Python objects)")
        object.__setattr__(self, "policies", tuple(policies))
        _check_matrix_memory(self.seeds, len(policies), names)
        self._check_where()
        self._check_declared()

    def _check_where(self) -> None:
        """Where rollouts run: an executor kind and a number of workers."""
        from pacplan.choices import EXECUTORS
        from pacplan.validation import check_choice

        check_choice(self.names.executor, self.executor, EXECUTORS)
        check_int(self.workers, self.names.workers, minimum=1)

    def _check_declared(self) -> None:
        """The horizon and return bounds as declared (the `gym` world's own checks, in the
        caller's spelling): whether the environment needs them is its world's to say."""
        from pacplan.worlds.from_gym.world import declared_return_bounds

        if self.costs.horizon is not None:
            check_int(self.costs.horizon, self.names.horizon, minimum=1)
        declared_return_bounds(self.costs.return_bounds, self.names.wording())
        pairs = {k: list(v) for k in ("return_bounds", "reward_bounds")
                 if isinstance(v := getattr(self.costs, k), tuple)}
        if pairs:  # a tuple and a list of the same bounds are one request
            object.__setattr__(self, "costs", dataclasses.replace(self.costs, **pairs))

    @property
    def in_this_process(self) -> bool:
        """Whether every row is rolled out here (serial, one worker)."""
        return self.executor == "serial" and self.workers == 1


def _check_matrix_memory(seeds: dict[str, list[int] | None], m: int, names: Names) -> None:
    """The largest matrix is held twice at its end (the array and its .npy bytes), beside
    the bookkeeping of its chunks of ten rows (a flag per row, ranges and slices: about 64
    bytes a row): refused before any rollout or folder when that cannot fit."""
    from pacplan.io.memory import check_fits

    rows = max(b - a for a, b in (r for k, r in seeds.items() if k != "train" and r))
    check_fits(rows * (16 * m + 64), f"a cost matrix of {rows:,} seeds × {m} policies",
               f"certify fewer seeds ({names.n}, {names.test_n})")
