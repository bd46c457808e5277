"""Robot worlds behind one interface (see `pacplan.worlds.base.World`)."""

from pacplan.worlds.base import World, make_world, register_world, world_names

__all__ = ["World", "make_world", "register_world", "world_names"]
