"""One exception type for every problem a user can fix: the CLI prints it as one line, exit 2."""


class PacplanError(ValueError):
    """Bad input, a bad file or an inconsistent run directory; the message names the problem."""
