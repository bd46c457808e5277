"""What a certify-policy command certifies, checked and identified before any rollout: the
environment (an id, 'module:EnvId', a registered EnvSpec, or a Python environment or factory),
the cost (a rule's name, 'module:function' or a Python function), the policies (paths,
'module:callable' or Python objects: `pacplan.policy_certification.live`), and the record of
them all that is the folder's identity (`identify`) and, with the seeds, the certificate's
provenance.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gymnasium import spaces

from pacplan.errors import PacplanError, short
from pacplan.policy_certification.names import Names
from pacplan.policy_certification.policies import ImportedPolicy, load_policy
from pacplan.policy_certification.request import CostOptions
from pacplan.policy_certification.rollout import NO_WEIGHTS
from pacplan.policy_certification.store import is_policy_dir


@dataclass(frozen=True)
class Environment:
    """How the environment was given: an id and kwargs, or a Python object (`factory` set,
    `sha256` and `source` its identity as `pacplan.policy_certification.live` gives it)."""

    env_id: str
    kwargs: dict[str, Any]
    factory: Any = None
    sha256: str = ""
    source: str = "file"


MAX_KWARGS_DEPTH = 32
"""How deeply keyword arguments may nest (a deeper value ended in a RecursionError traceback)."""
MAX_KWARGS_VALUES = 100_000
"""How many values keyword arguments may hold in all (a cycle counts without end)."""


def check_nesting(value: Any, what: str) -> None:
    """Refuse a value nested deeper than `MAX_KWARGS_DEPTH` or holding more than
    `MAX_KWARGS_VALUES` values (or a cycle), walked without recursion, before anything prints
    or serializes it."""
    stack, seen = [(value, 1)], 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if depth > MAX_KWARGS_DEPTH:
            raise PacplanError(f"{what} nests deeper than {MAX_KWARGS_DEPTH} levels: refused "
                               "(an environment's keyword arguments are small)")
        if seen > MAX_KWARGS_VALUES:
            raise PacplanError(f"{what} holds more than {MAX_KWARGS_VALUES:,} values (or refers "
                               "to itself): refused")
        if isinstance(item, Mapping):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1) for v in item)


def environment(env: Any, env_kwargs: Mapping[str, Any] | None, names: Names) -> Environment:
    """The environment argument, checked: kwargs must be JSON values with string keys, since
    they are recorded; a Python environment or factory takes no kwargs (it makes its own)."""
    import gymnasium as gym

    what = names.env_id
    kwargs: dict[str, Any] = {}
    if isinstance(env, gym.envs.registration.EnvSpec):
        registered = gym.registry.get(env.id)
        if registered is None or registered.entry_point != env.entry_point:
            raise PacplanError(f"{what}: the EnvSpec {env.id!r} is not the one registered "
                               "under its id: register it (gymnasium.register) first")
        kwargs = {k: v for k, v in env.kwargs.items() if registered.kwargs.get(k, object()) != v}
        env = env.id
    if not isinstance(env, str):
        if isinstance(env, gym.Env) or callable(env):
            from pacplan.policy_certification.live import env_factory

            if env_kwargs:
                raise PacplanError(f"{names.env_kwargs} goes to gymnasium.make; an "
                                   "environment given as an object or factory makes its own")
            label, factory, sha, source = env_factory(env)
            return Environment(label, {}, factory, sha, source)
        raise PacplanError(f"{what} must be a Gymnasium environment id, 'module:EnvId', a "
                           f"registered EnvSpec, an environment or a factory, got {short(env, 80)}")
    if not env.strip():
        raise PacplanError(f"{what} must be a Gymnasium environment id, got {env!r}")
    if env_kwargs is not None:
        check_nesting(env_kwargs, names.env_kwargs)
        if not isinstance(env_kwargs, Mapping) or not all(isinstance(k, str)
                                                          for k in env_kwargs):
            raise PacplanError(f"{names.env_kwargs} must be a mapping of names to "
                               f"values, got {short(env_kwargs, 80)}")
        kwargs.update(env_kwargs)
    try:
        json.dumps(kwargs, allow_nan=False)
    except (TypeError, ValueError):
        raise PacplanError(f"{names.env_kwargs} {short(kwargs, 80)}: every value must "
                           "be JSON (numbers, strings, booleans, lists, mappings), as it is "
                           "recorded with the certificate") from None
    return Environment(env, kwargs)


def make_world_for(env: Any, env_kwargs: Mapping[str, Any] | None, costs: CostOptions,
                   names: Names) -> tuple[Any, Environment, tuple[str, str] | None]:
    """(the `gym` world that declares the environment, its horizon and the cost, its errors in
    the caller's spelling; how the environment was given; a cost function object's (sha256,
    source), set on the world after it is built)."""
    from pacplan.worlds.from_gym.world import GymWorld

    given_env = environment(env, env_kwargs, names)
    cost, function = costs.cost, None
    if not isinstance(cost, str):
        from pacplan.policy_certification.live import cost_function

        function = cost_function(cost)
        cost = "terminated"  # the world is built with a rule, then given the function
    options: dict[str, Any] = {"cost": cost, "policy": NO_WEIGHTS, **costs.world_options()}
    if given_env.kwargs:
        options["env_kwargs"] = given_env.kwargs
    world = GymWorld.spelled(names.wording(), given_env.env_id, given_env.factory, **options)
    if function is None:
        return world, given_env, None
    label, fn, sha, source = function
    world.use_cost_function(label, fn)
    return world, given_env, (sha, source)


def load_policies(policies: Sequence[Any], observation_space: spaces.Space,
                  action_space: spaces.Space,
                  normalization: str = "obs_normalization") -> list[ImportedPolicy]:
    """Each policy as something that acts, with its identity; the same policy twice is
    refused (it would be certified as two). `normalization`: how the caller names the
    statistics' option, which a refused pickle is pointed to."""
    loaded = []
    for i, p in enumerate(policies):
        if isinstance(p, str | os.PathLike):
            loaded.append(load_policy(str(p), observation_space, action_space, normalization))
        else:
            from pacplan.policy_certification.live import policy_from_object

            loaded.append(policy_from_object(p, i, observation_space, action_space))
    seen: dict[str, str] = {}
    for p in loaded:
        if p.sha256 in seen:
            raise PacplanError(f"policies {seen[p.sha256]} and {p.label} are the same policy "
                               f"(sha256 {p.sha256[:12]}…): give each once")
        seen[p.sha256] = p.label
    return loaded


def identify(world: Any, env: Environment, cost_identity: tuple[str, str] | None,
             loaded: list[ImportedPolicy], seeds: dict[str, list[int] | None],
             clip_actions: bool) -> dict[str, Any]:
    """Everything the cost matrices depend on (the stamp's identity): user code (a cost
    function, an environment of the user's) by the sha256 of every user file it imports."""
    from pacplan.io.user_code import user_code_sha256

    rule: dict[str, Any] = {"cost": world.cost, "success_key": world.success_key,
                            "success_needs_terminated": world.success_needs_terminated}
    if world.cost == "return":
        rule["return_bounds"] = [world.r_min, world.r_max]
    if cost_identity is not None:  # a Python function
        rule["cost_source_sha256"], source = cost_identity
        if source != "file":
            rule["source"] = source
    elif ":" in world.cost:  # the function's code is part of what the costs depend on
        rule["cost_source_sha256"] = user_code_sha256(world.cost.partition(":")[0], world.cost)
    inputs: dict[str, Any] = {"env": _env_record(world, env), "horizon": world.horizon,
                              "cost": rule, "policies": [p.record() for p in loaded],
                              "seeds": {"first": seeds["cert"][0],  # type: ignore[index]
                                        "train": seeds["train"]}}
    if clip_actions:
        inputs["actions"] = "clipped into the action space"
    return inputs


def _env_record(world: Any, env: Environment) -> dict[str, Any]:
    """What the environment is: its id, kwargs and Gymnasium's version, the sha256 of its
    registration (entry point, kwargs, step limit, wrappers: `spec_sha256`), and for an
    environment of the user's (a user file registers it, or is its entry point) the sha256 of
    that code; for a library's, the library's version."""
    import gymnasium as gym

    from pacplan.io.user_code import user_code_sha256, user_files

    record: dict[str, Any] = {"id": world.env_id, "kwargs": world.env_kwargs,
                              "gymnasium": gym.__version__}
    if env.factory is not None:
        record["source_sha256"] = env.sha256
        if env.source != "file":
            record["source"] = env.source
        return record
    spec = gym.spec(world.registered_id())
    record["spec_sha256"] = spec_sha256(spec)
    entry = spec.entry_point
    module = (entry.partition(":")[0] if isinstance(entry, str)
              else getattr(entry, "__module__", None))
    registering = world.env_id.rpartition(":")[0]  # 'module:EnvId' names who registers it
    users = [m for m in dict.fromkeys((module, registering)) if m and user_files(m)]
    if users:  # the code that registers it (kwargs, limits) as well as the code it runs
        shas = [user_code_sha256(m, world.env_id) for m in users]
        record["source_sha256"] = shas[0] if len(shas) == 1 else hashlib.sha256(
            "\n".join(shas).encode()).hexdigest()
    elif module and (provider := providing_distribution(module)) is not None:
        record["provider"] = provider  # minigrid 3.2.0: a resume after an upgrade is refused
    return record


def spec_sha256(spec: Any) -> str:
    """sha256 of a registered `EnvSpec`'s every field but its id (which is recorded): a
    changed `gymnasium.register` call (kwargs, entry point, step limit) is a changed
    environment. Callables are named by module and qualified name."""
    def plain(value: Any) -> Any:
        if callable(value) and hasattr(value, "__qualname__"):
            return f"{getattr(value, '__module__', '')}:{value.__qualname__}"
        return repr(value)

    fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)
              if f.name not in ("id", "namespace", "name", "version")}
    text = json.dumps(fields, sort_keys=True, default=plain)
    return hashlib.sha256(text.encode()).hexdigest()


def providing_distribution(module: str) -> dict[str, str] | None:
    """{distribution: version} of the installed library whose code `module` is (MiniGrid's
    envs: minigrid), when it is not Gymnasium itself (whose version is recorded anyway)."""
    from importlib import metadata

    top = module.partition(".")[0]
    if top == "gymnasium":
        return None
    names = metadata.packages_distributions().get(top, [])  # reads every RECORD: not for
    if not names:                                           # gymnasium's own envs above
        return None
    found = {}
    for name in sorted(set(names)):
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found or None


def unidentified(inputs: dict[str, Any]) -> list[str]:
    """The inputs that are Python objects with a random identity (state in no file)."""
    found = [f"policy #{i}" for i, p in enumerate(inputs["policies"])
             if p.get("source") == "unidentified"]
    if inputs["cost"].get("source") == "unidentified":
        found.append(f"cost {inputs['cost']['cost']}")
    if inputs["env"].get("source") == "unidentified":
        found.append(f"environment {inputs['env']['id']}")
    return found


def refuse_unidentified_resume(out: Path, inputs: dict[str, Any], option: str) -> None:
    """A folder cannot be resumed with objects nothing can tell are still the same."""
    which = unidentified(inputs)
    if which and is_policy_dir(out):
        raise PacplanError(f"{option} {out} is a certify-policy folder to resume, but "
                           f"{', '.join(which)} cannot be identified across runs (a Python "
                           f"object whose state is in no file): choose a new {option}")
