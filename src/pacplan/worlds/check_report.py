"""What `check_world` returns (named results and a report) and the inputs it tries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from pacplan.errors import PacplanError

PASSED, FAILED, WARNING, SKIPPED = "passed", "failed", "warning", "skipped"
DEFAULT_SEEDS: tuple[int, ...] = tuple(range(8))
"""Enough seeds that a world whose seeds all give the same environment shows it."""
LAST_BITS = 1e-9
"""A batch-dependent difference up to this is reported as a warning (a batching world may change
the last bits with its chunk sizes, which are fixed within a run), beyond it as a failure."""


@dataclass(frozen=True)
class CheckResult:
    """One named check: passed, failed, warning or skipped, with a one-line reason."""

    name: str
    status: str
    detail: str


@dataclass
class CheckReport:
    """What `check_world` found; `ok` is False when any check failed (warnings do not count)."""

    world: str
    options: dict[str, Any]
    seeds: list[int]
    n_policies: int
    policy_dim: int | None = None
    seconds_per_rollout: float | None = None
    results: list[CheckResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.results if r.status == FAILED]

    def summary(self) -> str:
        """One line: the failed checks and the first one's reason (for a CLI error line)."""
        if self.ok:
            return f"world {self.world!r}: every check passed"
        first = self.failures[0]
        return (f"world {self.world!r}: {len(self.failures)} check(s) failed "
                f"({', '.join(r.name for r in self.failures)}); {first.name}: {first.detail}")

    def to_dict(self) -> dict[str, Any]:
        return {"world": self.world, "options": self.options, "ok": self.ok,
                "policy_dim": self.policy_dim, "seeds": self.seeds,
                "n_policies": self.n_policies, "seconds_per_rollout": self.seconds_per_rollout,
                "checks": [{"name": r.name, "status": r.status, "detail": r.detail}
                           for r in self.results]}


def default_policies(dim: int, k: int = 4, seed: int = 0) -> np.ndarray:
    """Zeros plus k − 1 draws of N(0, 0.1²) from a fixed RNG: small weights of the size an ES
    prior starts at, the same on every run."""
    rng = np.random.default_rng(seed)
    draws = 0.1 * rng.standard_normal((max(k - 1, 0), dim))
    return np.vstack([np.zeros((1, dim)), draws]).astype(np.float32)[:k]


def parse_world_options(pairs: Sequence[str]) -> dict[str, Any]:
    """`key=value` strings (from `--option`) -> options, each value read as a YAML scalar or
    list (so `dim=4` is the integer 4, as it would be in a config)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise PacplanError(f"--option {pair!r}: expected key=value, e.g. dim=4")
        if key in options:
            raise PacplanError(f"--option {key!r} is given twice")
        try:
            options[key] = yaml.safe_load(text) if text.strip() else ""
        except yaml.YAMLError:
            options[key] = text
    return options
