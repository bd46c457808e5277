"""How a caller spells each certify-policy argument in an error: the command's flags (`CLI`) or
Python's keyword names (`PYTHON`), one `Names` per front door, passed in so that every message
is written in the caller's spelling the first time (never reworded afterwards)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pacplan.worlds.from_gym.wording import Wording


@dataclass(frozen=True)
class Names:
    """How the caller's user spells each argument in an error (CLI flags or Python names)."""

    env_id: str = "env_id"
    env_kwargs: str = "env_kwargs"
    n: str = "n"
    test_n: str = "test_n"
    first_seed: str = "first_seed"
    train_seeds: str = "train_seeds"
    out: str = "out"
    cost: str = "cost"
    success_key: str = "success_key"
    success_needs_terminated: str = "success_needs_terminated"
    return_bounds: str = "return_bounds"
    reward_bounds: str = "reward_bounds"
    horizon: str = "horizon"
    delta: str = "delta"
    clip_actions: str = "clip_actions"
    obs_normalization: str = "obs_normalization"
    workers: str = "workers"
    executor: str = "executor"
    progress: str = "progress"
    return_pair: str = "[R_min, R_max]"
    """How the caller writes a pair of return bounds."""
    reward_pair: str = "[r_min, r_max]"
    """How the caller writes a pair of per-step reward bounds."""

    def spelling(self, option: str) -> str:
        """How the user spells argument `option` (its Python name)."""
        return str(getattr(self, option))

    def wording(self) -> Wording:
        """The `gym` world's wording for this caller: its options in the caller's spelling,
        with no 'gym world: option' before them (the caller gave them as arguments)."""
        spellings = tuple((f.name, getattr(self, f.name)) for f in dataclasses.fields(self)
                          if not f.name.endswith("_pair") and getattr(self, f.name) != f.name)
        return Wording(head="", heads="", world="", spellings=spellings,
                       return_pair=self.return_pair, reward_pair=self.reward_pair)


PYTHON = Names()
"""`pacplan.certify_policy(...)`'s keyword names."""

CLI = Names(env_id="ENV_ID", env_kwargs="--env-kwargs", n="--n", test_n="--test-n",
            first_seed="--first-seed", train_seeds="--train-seeds", out="--out", cost="--cost",
            success_key="--success-key", success_needs_terminated="--success-needs-terminated",
            return_bounds="--return-bounds", reward_bounds="--reward-bounds",
            horizon="--horizon", delta="--delta", clip_actions="--clip-actions",
            obs_normalization="--obs-normalization", workers="--workers",
            executor="--executor", progress="--quiet", return_pair="LO,HI",
            reward_pair="LO,HI")
"""`pacplan certify-policy`'s flags (progress is shown unless --quiet)."""
