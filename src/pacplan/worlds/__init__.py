"""Robot worlds behind one interface (see `pacplan.worlds.base.World`)."""

from pacplan.worlds.base import World, make_world, register_world, world_names
from pacplan.worlds.check import check_world
from pacplan.worlds.check_report import CheckReport, CheckResult

__all__ = ["CheckReport", "CheckResult", "World", "check_world", "make_world", "register_world",
           "world_names"]
