"""The one list of every name a user can choose: bounds, solvers, executors.

Config, CLI and code all read these tuples, so a new choice is added in exactly one place.
"""

from __future__ import annotations

BOUNDS: tuple[str, ...] = ("mcallester", "quadratic", "klinv")
"""The three PAC-Bayes bounds (`pacplan.pacbayes.bounds`)."""

BOUND_CHOICES: tuple[str, ...] = (*BOUNDS, "best")
"""What a posterior may minimize: one bound, or `best` (the smallest of the three)."""

SOLVERS: tuple[str, ...] = ("gibbs", "rep")
"""Posterior solvers: the exact Gibbs search, or the paper's relative-entropy program."""

EXECUTORS: tuple[str, ...] = ("serial", "processes", "ray")
"""Where rollouts run (`pacplan.pipeline.execution.executors`); never changes a result."""
