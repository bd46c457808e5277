"""Validation of the simulators against each other (not imported by the library's core).

`uav_crossval`: the batched UAV simulator against the PyBullet oracle. Not to be confused with
`pacplan.validation`, the checks of user input.
"""
