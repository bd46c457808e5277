"""The seeds `certify-policy` rolls out on, checked before any work: N certification seeds
from a first seed, T test seeds after them, and neither may overlap the seeds the user says the
policies were trained on (a certificate needs environments the policies never saw)."""

from __future__ import annotations

from collections.abc import Sequence

from pacplan.errors import PacplanError
from pacplan.policy_certification.names import Names
from pacplan.validation import (
    INT64_MAX,
    check_int64_seed_range,
    check_whole_number,
    overlapping_ranges,
)

DEFAULT_FIRST_SEED = 1_000_000
"""Certification seeds start here by default: far from the small seeds training runs use."""

DEFAULT_N = 500
"""Certification seeds when none are given (the command's --n and Python's n= alike)."""


def seed_ranges(n: int, test_n: int, first_seed: int, train_seeds: Sequence[int] | None,
                names: Names) -> dict[str, list[int] | None]:
    """The certification, test and declared training seed ranges [start, stop), checked."""
    n = check_whole_number(n, names.n, minimum=1)
    test_n = check_whole_number(test_n, names.test_n, minimum=0)
    first = check_whole_number(first_seed, names.first_seed, minimum=0, maximum=INT64_MAX)
    cert = list(check_int64_seed_range([first, first + n], f"{names.n} seeds from "
                                       f"{names.first_seed}"))
    test = (list(check_int64_seed_range([first + n, first + n + test_n], f"{names.test_n} "
                                        "seeds")) if test_n else None)
    train = None
    if train_seeds is not None:
        seq = list(train_seeds) if isinstance(train_seeds, tuple | range) else train_seeds
        train = list(check_int64_seed_range(seq, names.train_seeds))
        roles = {"certification": cert, "test": test, "training": train}
        for a, b in overlapping_ranges({k: v for k, v in roles.items() if v is not None}):
            raise PacplanError(
                f"{a} seeds [{roles[a][0]}, {roles[a][1]}) overlap the {b} seeds "
                f"[{roles[b][0]}, {roles[b][1]}) declared with {names.train_seeds}: a "
                f"certificate needs environments the policies never saw (choose "
                f"{names.first_seed} ≥ {train[1]})")
    return {"cert": cert, "test": test, "train": train}
