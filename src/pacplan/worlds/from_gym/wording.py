"""How the `gym` world's checks name its options in a message.

A config's world options are named as such ('gym world: option horizon'); a caller that builds
the world from its own arguments (`pacplan certify-policy`'s `--horizon`, Python's `horizon=`)
passes its own `Wording`, so each message is written in the caller's spelling the first time
rather than reworded afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Wording:
    """How a caller spells the `gym` world's options, and what a message about the world (not
    one option) starts with."""

    head: str = "gym world: option "
    """Before an option's name at the head of a message."""
    heads: str = "gym world: options "
    """Before two options' names at the head of a message."""
    world: str = "gym world: "
    """Before a message about the environment itself ('cannot make …')."""
    spellings: tuple[tuple[str, str], ...] = ()
    """(option, how the caller spells it) where the two differ."""
    return_pair: str = "[R_min, R_max]"
    """How the caller writes a pair of return bounds."""
    reward_pair: str = "[r_min, r_max]"
    """How the caller writes a pair of per-step reward bounds."""

    def name(self, option: str) -> str:
        """Option `option` inside a sentence."""
        return dict(self.spellings).get(option, option)

    def __call__(self, option: str) -> str:
        """Option `option` at the head of a message."""
        return f"{self.head}{self.name(option)}"

    def both(self, first: str, second: str) -> str:
        """Two options at the head of a message."""
        return f"{self.heads}{self.name(first)} and {self.name(second)}"


CONFIG = Wording()
"""A config's `gym` world options."""
