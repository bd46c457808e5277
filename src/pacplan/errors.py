"""One exception type for every problem a user can fix: the CLI prints it as one line, exit 2."""


class PacplanError(ValueError):
    """Bad input, a bad file or an inconsistent run directory; the message names the problem."""


class CostRangeError(PacplanError):
    """A world's raw outcome lies outside the range its options declare (a Gymnasium return
    outside `return_bounds`): `check_world` names it `in_declared_range`, not a shape problem."""


class UnidentifiedInputWarning(UserWarning):
    """A certificate's input is a Python object whose state is in no file (a lambda, a closure,
    a callable object, an environment instance): it cannot be re-verified from files and its
    folder cannot be resumed. Filter it like any warning (`warnings.simplefilter("ignore",
    pacplan.UnidentifiedInputWarning)`) once you have read it."""


class NotCheckedWarning(UserWarning):
    """`pacplan.verify` could not re-check something a certificate rests on (a recorded file
    not found, a Python object no file holds): the certificate verified for the rest.
    `pacplan.verify(path, strict=True)` raises instead."""
