"""A Gymnasium environment as a pacplan world (the `gym` world): Gymnasium → pacplan.

world (seeds, k policies stepped in lockstep, the cost), policies (the policy families θ can
be), bounds (return bounds from per-step reward bounds), costs (the cost rules), steps (what
crosses policy and env, checked by type) and export (its planner for `pacplan export`). The
other direction, a pacplan world as a Gymnasium environment, is `pacplan.worlds.as_gym` and
each world's `gym_env`.
"""
