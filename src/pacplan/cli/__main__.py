"""`python -m pacplan.cli`: the same command line as `pacplan`."""

from pacplan.cli import main

main()
