"""One exception type for every problem a user can fix: the CLI prints it as one line, exit 2."""


class PacplanError(ValueError):
    """Bad input, a bad file or an inconsistent run directory; the message names the problem."""


class CostRangeError(PacplanError):
    """A world's raw outcome lies outside the range its options declare (a Gymnasium return
    outside `return_bounds`): `check_world` names it `in_declared_range`, not a shape problem."""
