"""The single seam between the learning code and the robots: the `World` protocol and a registry.

A registry entry names, by import path, everything pacplan knows about a world: its factory,
its figure renderer, its Gymnasium environment, its planner exporter, its place in the paper's
Table 1 and its teacher (each optional; `pacplan.worlds.story`), so the tools above never branch
on a world's name. Import paths keep naming a world cheap (nothing imports torch or PyBullet
until it is built) and let worker processes rebuild a world from its (name, options) spec.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from pacplan.errors import PacplanError
from pacplan.io.renamed import current_path
from pacplan.validation import check_keyword_options
from pacplan.worlds.story import PaperStory, PlannerExporter


@runtime_checkable
class World(Protocol):
    """A distribution of environments (named by integer seeds) and a cost for policy weights."""

    name: str

    def policy_dim(self) -> int:
        """Number of policy weights d."""
        ...

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """thetas (k, d) float32, seeds (n,) int64 -> (n, k) float64 costs in [0, 1].

        Deterministic: the same inputs give the same outputs.
        """
        ...


@runtime_checkable
class StratifiedWorld(Protocol):
    """A world that names strata of its environments: predicates on a seed evaluated without
    simulating (the quadruped's `steep`: the first tent's slope), so ES can over-draw the hard
    ones and still estimate the world's expected cost (`pacplan.es.strata`)."""

    def strata(self) -> dict[str, str]:
        """Stratum name -> what its environments share (one line)."""
        ...

    def in_stratum(self, name: str, seeds: np.ndarray) -> np.ndarray:
        """(n,) bool: which of `seeds` (n,) int64 lie in stratum `name`; never simulates."""
        ...


def world_strata(world: Any) -> dict[str, str]:
    """The strata `world` names ({} when it names none)."""
    return dict(world.strata()) if isinstance(world, StratifiedWorld) else {}


def stratum_members(world: Any, name: str, seeds: np.ndarray) -> np.ndarray:
    """(n,) bool membership of `seeds` in stratum `name` of `world`; an unknown name is refused
    listing the world's strata."""
    known = world_strata(world)
    if name not in known:
        listed = ", ".join(sorted(known)) if known else "none"
        raise PacplanError(f"unknown stratum {name!r} of world {world.name!r}; its strata: "
                           f"{listed}")
    sd = np.asarray(seeds, dtype=np.int64).reshape(-1)
    mask = np.asarray(world.in_stratum(name, sd))
    if mask.shape != sd.shape or mask.dtype != np.bool_:
        raise PacplanError(f"world {world.name!r}: in_stratum({name!r}) must return {sd.size} "
                           f"booleans, got {mask.dtype} of shape {mask.shape}")
    return mask


@dataclass(frozen=True)
class WorldEntry:
    """A registered world: "package.module:attribute" paths, resolved only when used.

    factory(**options) -> World; renderer(seed=, out=, theta_path=, world_options=) -> the PNG
    path
    draws one environment; gym_entry is the Gymnasium env class registered as gym_id, and
    gym_max_episode_steps its episode length in the spec (so `TimeLimit` wraps it); exporter a
    `PlannerExporter` (the world has a planner runtime), paper a `PaperStory` (the paper's
    Table 1 has rows for it), teachers the kinds of privileged teacher `train-prior`'s
    distillation stage can teach its policy with (`TEACHERS`), its default first.
    """

    factory: str
    renderer: str | None = None
    gym_id: str | None = None
    gym_entry: str | None = None
    gym_max_episode_steps: int | None = None
    exporter: str | None = None
    paper: str | None = None
    teachers: tuple[str, ...] = ()


TEACHERS = ("uav-lattice", "quadruped-look-ahead", "quadruped-opening")
"""The privileged teachers `pacplan.pipeline.prior.distill` knows: the UAV's exact lattice program
(`worlds.uav.teacher`), the quadruped's look-ahead in the simulator (`worlds.quadruped.teacher`)
and its climbing opening on steep first tents (`worlds.quadruped.opening`, which refines a prior
already trained). A world names those it supports; a new kind of teacher is a new training
stage, written in `pacplan.pipeline`."""


_REGISTRY: dict[str, WorldEntry] = {
    "toy": WorldEntry("pacplan.worlds.toy:ToyWorld"),
    "gym": WorldEntry("pacplan.worlds.from_gym.world:GymWorld",  # any registered Gymnasium env
                      exporter="pacplan.worlds.from_gym.export:EXPORTER"),
    "uav": WorldEntry("pacplan.worlds.uav:UAVWorld",
                      renderer="pacplan.worlds.uav.render:render_figure",
                      gym_id="pacplan/UAVObstacleField-v0",
                      gym_entry="pacplan.worlds.uav.gym_env:UAVObstacleFieldEnv",
                      gym_max_episode_steps=12,  # 12 primitives of 1 s (spec.N_STEPS)
                      exporter="pacplan.worlds.uav.export:EXPORTER",
                      paper="pacplan.worlds.uav.paper_table:STORY", teachers=("uav-lattice",)),
    "quadruped": WorldEntry("pacplan.worlds.quadruped:QuadrupedWorld",
                            renderer="pacplan.worlds.quadruped.render:render_figure",
                            gym_id="pacplan/MinitaurTerrain-v0",
                            gym_entry="pacplan.worlds.quadruped.gym_env:MinitaurTerrainEnv",
                            gym_max_episode_steps=20,  # 10 s of 0.5 s primitives
                            exporter="pacplan.worlds.quadruped.export:EXPORTER",
                            paper="pacplan.worlds.quadruped.paper_table:STORY",
                            teachers=("quadruped-look-ahead", "quadruped-opening")),
}


def register_world(name: str, factory: str, renderer: str | None = None,
                   gym_id: str | None = None, gym_entry: str | None = None,
                   gym_max_episode_steps: int | None = None, exporter: str | None = None,
                   paper: str | None = None, teacher: str | tuple[str, ...] | None = None
                   ) -> None:
    """Register a world by import paths "package.module:Attribute" (`WorldEntry`); `teacher`
    is one kind or several, the default first."""
    teachers = (teacher,) if isinstance(teacher, str) else tuple(teacher or ())
    unknown = [t for t in teachers if t not in TEACHERS]
    if unknown:
        raise PacplanError(f"teacher {unknown[0]!r} of world {name!r} is not one pacplan has: "
                           f"{', '.join(TEACHERS)}")
    _REGISTRY[name] = WorldEntry(factory, renderer, gym_id, gym_entry, gym_max_episode_steps,
                                 exporter, paper, teachers)


def world_names() -> list[str]:
    return sorted(_REGISTRY)


def world_entry(name: str) -> WorldEntry:
    """The registry entry of `name`, or a `PacplanError` listing the known worlds. A world of
    pacplan's own that lives above this layer (certify-policy's rollouts, which its workers
    rebuild) is named by its factory's import path, "pacplan.package.module:Factory", so no
    entry here points upward."""
    if name.startswith("pacplan.") and ":" in name and name not in _REGISTRY:
        return WorldEntry(current_path(name))  # a record's old package name read as today's
    if name not in _REGISTRY:
        raise PacplanError(f"unknown world {name!r}; known worlds: {', '.join(world_names())}")
    return _REGISTRY[name]


def world_exporter(name: str) -> PlannerExporter:
    """The planner exporter of world `name`, or a `PacplanError` naming the worlds that have
    one."""
    path = world_entry(name).exporter
    if path is None:
        raise PacplanError(f"world {name!r} has no planner runtime (worlds that have one: "
                           f"{_worlds_with('exporter')})")
    return resolve_target(path, f"world {name!r}'s planner exporter")  # type: ignore[no-any-return]


def world_teacher(name: str, kind: str | None = None) -> str:
    """The teacher kind `kind` of world `name` (`TEACHERS`; None: the world's default), or a
    `PacplanError` naming the worlds that have a teacher, or the kinds this one has."""
    teachers = world_entry(name).teachers
    if not teachers:
        raise PacplanError(f"the privileged teacher plans only in the "
                           f"{_worlds_with('teachers')} worlds, not {name!r} (remove the "
                           "distill section)")
    if kind is None:
        return teachers[0]
    if kind not in teachers:
        raise PacplanError(f"distill.teacher {kind!r} does not teach in world {name!r}; its "
                           f"teachers: {', '.join(teachers)}")
    return kind


def _worlds_with(field: str) -> str:
    """The registered worlds whose entry has `field` ("none" if none), for a refusal."""
    return ", ".join(n for n in world_names() if getattr(_REGISTRY[n], field)) or "none"


def world_paper_story(name: str) -> PaperStory | None:
    """The paper's Table 1 for world `name` (None: the paper has no rows for it; an unknown
    world too, as a report of a world no longer registered still renders)."""
    path = _REGISTRY[name].paper if name in _REGISTRY else None
    return None if path is None else resolve_target(path, f"world {name!r}'s paper rows")


def return_range(name: str, options: dict[str, Any]) -> tuple[float, float] | None:
    """[R_min, R_max] of a world whose cost is a rescaled return, (R_max − R)/(R_max − R_min)
    (its factory's `cost_is_return(**options)` says so, the gym world's `cost: return`),
    built to read them; None for any other world or cost rule, or a world not registered."""
    if name not in _REGISTRY:
        return None
    try:
        factory = world_factory(name)
    except PacplanError:  # its package is not installed here: it says nothing of returns
        return None
    scaled = getattr(factory, "cost_is_return", None)
    if not callable(scaled) or not scaled(**options):
        return None
    world = make_world(name, **options)
    return float(world.r_min), float(world.r_max)  # type: ignore[attr-defined]


def world_factory(name: str) -> Any:
    """The factory of world `name`, imported (a `PacplanError` for an unknown world or one
    whose package cannot be imported here)."""
    return resolve_target(world_entry(name).factory, f"world {name!r}")


def resolve_target(target: str, what: str) -> Any:
    module_name, _, attr = current_path(target).partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise PacplanError(f"{what} is not available: {exc}") from exc


def check_world_options(name: str, options: dict[str, Any]) -> None:
    """Every option is a parameter of the world's factory, of the type it is annotated with,
    and, where the factory has a `check_options(**options)` (building no simulator), a
    combination it accepts: a baseline's world is otherwise first built after the matrices."""
    factory = world_factory(name)
    check_keyword_options(f"world {name!r}", factory, options)
    check = getattr(factory, "check_options", None)
    if callable(check):
        _call(name, options, check)


def warmup_note(name: str, options: dict[str, Any]) -> str | None:
    """What a world's first call costs beyond its work (the UAV's torch.compile), said before
    a run computes costs: the factory's optional `warmup_note(**options)`, else None."""
    factory = world_factory(name)
    note = getattr(factory, "warmup_note", None)
    return note(**options) if callable(note) else None


def prior_options(name: str) -> tuple[str, ...]:
    """The options of world `name` that choose what θ is (its factory's `PRIOR_OPTIONS`, the
    UAV's policy family): a prior file names them, and two runs differing only in them fly the
    same environments."""
    factory = world_factory(name)
    return tuple(getattr(factory, "PRIOR_OPTIONS", ()))


def policy_note(world: Any) -> str:
    """The policy family of a world whose options choose among several (its `policy_label()`,
    e.g. "policy conv, policy_width 8"), "" otherwise: what a refusal of wrong-sized weights
    names beside both sizes."""
    label = getattr(world, "policy_label", None)
    return str(label()) if callable(label) else ""


def noted(exc: Exception, note: str) -> PacplanError:
    """`exc`'s one line with the world's policy family (`policy_note`) appended, if any."""
    return PacplanError(f"{exc} ({note})" if note else str(exc))


def make_world(name: str, **options: Any) -> World:
    """Build the world called `name` with keyword options from a config.

    Unknown options and values of the wrong type are named before the factory runs; what the
    factory's own parsing still refuses (a TypeError or ValueError) is named as well.
    """
    factory = world_factory(name)
    check_keyword_options(f"world {name!r}", factory, options)
    return _call(name, options, factory)


def _call(name: str, options: dict[str, Any], fn: Callable[..., Any]) -> Any:
    """`fn(**options)`, with what the factory's own parsing refuses named as a `PacplanError`."""
    try:
        return fn(**options)
    except PacplanError:
        raise
    except (TypeError, ValueError) as exc:
        raise PacplanError(_factory_error(name, options, exc)) from None


def _factory_error(name: str, options: dict[str, Any], exc: Exception) -> str:
    """Name the option(s) whose value the factory's message quotes, else list them all."""
    text = " ".join(str(exc).split())
    named = [k for k, v in options.items() if isinstance(v, str | int | float) and repr(v) in text]
    culprit = (f"option {named[0]!r} = {options[named[0]]!r}" if len(named) == 1
               else f"options {options}")
    return f"world {name!r}: bad {culprit}: {text}"


def world_renderer(name: str) -> Callable[..., Any] | None:
    """The figure renderer of world `name`, or None if it has none."""
    target = world_entry(name).renderer
    return None if target is None else resolve_target(target, f"renderer of world {name!r}")


def gym_specs() -> dict[str, dict[str, Any]]:
    """Gymnasium id -> keyword arguments of `gymnasium.register` (entry point, episode length)
    of every registered world that has an environment."""
    return {
        e.gym_id: {"entry_point": e.gym_entry, "max_episode_steps": e.gym_max_episode_steps}
        for e in _REGISTRY.values()
        if e.gym_id and e.gym_entry
    }
