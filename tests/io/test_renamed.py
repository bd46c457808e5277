"""Import paths recorded under a renamed package's old name (`pacplan.io.renamed`): a record or
config written before `pacplan.run` became `pacplan.pipeline` and `pacplan.certify_policy`
became `pacplan.policy_certification` still resolves, through the one map of old names."""

from __future__ import annotations

import pytest

import pacplan
from pacplan.io.renamed import RENAMED, current_path
from pacplan.io.user_code import import_target
from pacplan.worlds.base import make_world, resolve_target, world_entry, world_factory


@pytest.mark.parametrize("old, new", [
    ("pacplan.run.rundir", "pacplan.pipeline.rundir"),
    ("pacplan.run", "pacplan.pipeline"),
    ("pacplan.run.chunks:Ledger", "pacplan.pipeline.execution.chunks:Ledger"),
    ("pacplan.pipeline.chunks:Ledger", "pacplan.pipeline.execution.chunks:Ledger"),
    ("pacplan.run.distill_quadruped", "pacplan.pipeline.prior.distill_quadruped"),
    ("pacplan.run.executors:SerialExecutor",
     "pacplan.pipeline.execution.executors:SerialExecutor"),
    ("pacplan.certify_policy.world:PolicyRollouts",
     "pacplan.policy_certification.world:PolicyRollouts"),
    ("pacplan.certify_policy.rollout:no_weights",
     "pacplan.policy_certification.rollout:no_weights"),
])
def test_an_old_path_is_read_as_the_new_one(old: str, new: str) -> None:
    assert current_path(old) == new
    assert current_path(new) == new


@pytest.mark.parametrize("path", ["pacplan.runtime.spec", "pacplan.worlds.toy:ToyWorld",
                                  "user_policies:lean", "run.x:y", "pacplan.runner:f",
                                  "pacplan.certify_policyx:f"])
def test_any_other_path_is_left_alone(path: str) -> None:
    assert current_path(path) == path


def test_no_old_name_is_a_module_today() -> None:
    """The old names are free (no package doubles as the front door's functions), and the new
    ones exist."""
    import importlib.util

    for old, new in RENAMED.items():
        assert importlib.util.find_spec(f"pacplan.{old}") is None
        assert importlib.util.find_spec(f"pacplan.{new}") is not None
    assert callable(pacplan.run) and callable(pacplan.certify_policy)


def test_every_moved_module_is_where_the_map_says() -> None:
    import importlib.util

    from pacplan.io.renamed import MOVED

    for old, new in MOVED.items():
        assert importlib.util.find_spec(f"pacplan.{old}") is None, old
        assert importlib.util.find_spec(f"pacplan.{new}") is not None, new


def test_readers_of_recorded_paths_accept_the_old_names() -> None:
    """A world factory named by import path, a registry-style target and a `gym` world's
    `policy: 'module:factory'`, each under the old package name."""
    from pacplan.policy_certification.rollout import no_weights
    from pacplan.policy_certification.world import PolicyRollouts

    assert world_entry("pacplan.certify_policy.world:PolicyRollouts").factory == \
        "pacplan.policy_certification.world:PolicyRollouts"
    assert world_factory("pacplan.certify_policy.world:PolicyRollouts") is PolicyRollouts
    assert resolve_target("pacplan.certify_policy.rollout:no_weights", "x") is no_weights
    assert import_target("pacplan.certify_policy.rollout:no_weights", "x") is no_weights
    world = make_world("gym", env_id="CartPole-v1", cost="terminated",
                       policy="pacplan.certify_policy.rollout:no_weights")
    assert world.policy_dim() == 1
