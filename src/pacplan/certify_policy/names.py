"""How a caller spells each certify-policy argument in an error: the command's flags or
Python's keyword names, one `Names` per front door."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Names:
    """How the caller's user spells each argument in an error (CLI flags or Python names)."""

    n: str = "n"
    test_n: str = "test_n"
    first_seed: str = "first_seed"
    train_seeds: str = "train_seeds"
    out: str = "out"
    cost: str = "cost"
    delta: str = "delta"
    options: tuple[tuple[str, str], ...] = ()
    """(gym world option, how the user spells it): how a cost option's error is reworded."""
    notation: tuple[tuple[str, str], ...] = ()
    """(the world's notation for a value, the caller's): e.g. '[R_min, R_max]' → 'LO,HI'."""

    def spelling(self, option: str) -> str:
        """How the user spells argument `option` (its Python name when not listed)."""
        return dict(self.options).get(option, option)

    def reword(self, message: str) -> str:
        """A `gym` world error about an option, in the caller's spelling of it."""
        text = re.sub(r"gym world: (options? )?", "", message)
        for option, spelling in self.options:
            text = re.sub(rf"(?<![\w-]){option}(?=[ ,;:)]|$)", spelling, text)
        for notation, spelling in self.notation:
            text = text.replace(notation, spelling)
        return text
