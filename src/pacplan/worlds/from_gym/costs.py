"""How one Gymnasium episode becomes a cost in [0, 1], as the user declares it.

Shared by the `gym` world and `pacplan certify-policy`, so a rule means the same in both:

- "return": (R_max − R)/(R_max − R_min) for declared return bounds (the caller checks them);
- "terminated": 1 if the episode terminated (the environment's failure) before the horizon;
- "success": 0 if the episode ended in success, else 1. Success is the last step's
  `info[success_key]` being True or 1 (`is_success` by default, Gymnasium-Robotics'
  convention; a missing entry, or a value such as the string "False", is an error, never a
  guess), and, with `success_needs_terminated`, the episode also terminated (a goal reached,
  not a time limit). Conditions are named, never given as code to evaluate;
- "module:function": `function(episode)` with the `Episode` below, returning a number in
  [0, 1]. A value outside [0, 1], NaN, a non-number or an exception is an error naming the
  seed and the function: a clipped or guessed cost would void the certificate.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacplan.errors import CostRangeError, PacplanError, short
from pacplan.worlds.from_gym.wording import CONFIG, Wording

BUILTIN_COSTS: tuple[str, ...] = ("return", "terminated", "success")
DEFAULT_SUCCESS_KEY = "is_success"


@dataclass(frozen=True)
class Episode:
    """One finished episode, as a cost function sees it.

    `total_return` is the undiscounted sum of rewards, `last_reward` the final step's reward,
    `terminated`/`truncated` the final step's flags (both False when the horizon cut it),
    `length` the number of steps, `info` the final step's info dict, `seed` the environment.
    """

    seed: int
    total_return: float
    last_reward: float
    terminated: bool
    truncated: bool
    length: int
    info: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CostRule:
    """A checked cost declaration: `kind` is a built-in name or "function"."""

    kind: str
    success_key: str = DEFAULT_SUCCESS_KEY
    success_needs_terminated: bool = False
    target: str | None = None
    function: Callable[[Episode], Any] | None = field(default=None, compare=False, repr=False)

    def describe(self) -> str:
        """The rule in a few words (for reports and error lines)."""
        if self.kind == "function":
            return f"cost function {self.target}"
        if self.kind == "success":
            both = " and terminated" if self.success_needs_terminated else ""
            return f"success (info[{self.success_key!r}]{both})"
        return self.kind


def cost_rule(cost: str, success_key: str | None = None,
              success_needs_terminated: bool = False, words: Wording = CONFIG) -> CostRule:
    """Check a cost declaration and resolve a `module:function`; errors name the options as
    `words` spells them."""
    what = words("cost")
    if not isinstance(cost, str):
        raise PacplanError(f"{what} must be one of {', '.join(BUILTIN_COSTS)} or "
                           f"'module:function', got {cost!r}")
    if cost != "success" and (success_key is not None or success_needs_terminated):
        raise PacplanError(f"{what} is {cost!r}, but a success key or "
                           f"{words.name('success_needs_terminated')} applies only to "
                           f"{words.name('cost')} 'success'")
    if cost in BUILTIN_COSTS:
        key = DEFAULT_SUCCESS_KEY if success_key is None else success_key
        if not isinstance(key, str) or not key:
            raise PacplanError(f"{what}: {words.name('success_key')} must be a non-empty "
                               f"string, got {key!r}")
        return CostRule(cost, key, bool(success_needs_terminated))
    module, sep, name = cost.partition(":")
    if not (sep and module and name):
        raise PacplanError(f"{what} {cost!r} is not one of {', '.join(BUILTIN_COSTS)} nor "
                           "'module:function'")
    from pacplan.io.user_code import import_target

    fn = import_target(cost, f"{what} function {cost!r}")
    if not callable(fn):
        raise PacplanError(f"{what} function {cost!r} is not callable")
    return CostRule("function", target=cost, function=fn)


def episode_cost(rule: CostRule, episode: Episode) -> float | None:
    """The cost of `episode` under `rule`; None for "return", whose bounds the caller holds."""
    if rule.kind == "return":
        return None
    if rule.kind == "terminated":
        return float(episode.terminated)
    if rule.kind == "success":
        from pacplan.worlds.from_gym.steps import success_value

        try:
            ok = success_value(episode.info, rule.success_key)
        except PacplanError as exc:
            raise PacplanError(f"{rule.describe()} on seed {episode.seed}: {exc}") from None
        if rule.success_needs_terminated:
            ok = ok and episode.terminated
        return 0.0 if ok else 1.0
    assert rule.function is not None
    try:
        value = rule.function(episode)
    except PacplanError:
        raise
    except (Exception, SystemExit) as exc:  # the user's code (sys.exit too): named, one line
        from pacplan.io.user_code import reason

        raise PacplanError(f"{rule.describe()} raised {reason(exc)} on seed "
                           f"{episode.seed}") from None
    return checked_cost(value, rule, episode.seed)


def checked_cost(value: Any, rule: CostRule, seed: int) -> float:
    """A cost function's value as a float in [0, 1], or an error naming the seed."""
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(()).item()
    if not isinstance(value, numbers.Real | np.bool_):
        raise PacplanError(f"{rule.describe()} returned {short(value, 40)} "
                           f"({type(value).__name__}) on seed {seed}: a cost is a number in "
                           "[0, 1]")
    try:
        number = float(value)
    except OverflowError:  # an int beyond a float's range
        number = math.inf
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise CostRangeError(f"{rule.describe()} returned {number!r} on seed {seed}, outside "
                             "[0, 1]: a cost is never clipped (that would void the "
                             "certificate); return a number in [0, 1]")
    return number
