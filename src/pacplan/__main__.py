"""`python -m pacplan`: the same command line as `pacplan` (`pacplan.cli`)."""

from pacplan.cli import main

main()
