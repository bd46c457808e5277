"""One episode loop (`pacplan.worlds.from_gym.episodes`): the `gym` world stepping its own
policy family and certify-policy stepping a policy trained elsewhere run the same episodes,
so a cost rule means the same in both (a promise that was a docstring before)."""

from __future__ import annotations

import numpy as np

from pacplan.policy_certification.kinds import PolicyKind
from pacplan.policy_certification.policies import ImportedPolicy
from pacplan.policy_certification.rollout import rollout
from pacplan.worlds.from_gym.world import GymWorld


def test_the_gym_world_and_certify_policy_run_the_same_episodes() -> None:
    world = GymWorld("CartPole-v1", policy="linear", cost="terminated", horizon=80)
    family = world.policy_family()
    thetas = np.random.default_rng(0).normal(size=(4, world.policy_dim()))
    env = world.make_env()
    for seed in (3, 11):
        ours = world.episodes(thetas, seed).records
        for j, theta in enumerate(thetas):
            def act(obs: object, theta: np.ndarray = theta) -> object:
                return family.act(theta[None], np.asarray(obs, np.float64)[None])[0]

            policy = ImportedPolicy(f"theta {j}", PolicyKind.CALLABLE, "0" * 64, act)
            theirs, clipped = rollout(world, env, policy, seed)
            assert theirs == ours[j] and clipped == 0
    assert len({e.length for e in ours}) > 1  # episodes of several lengths were compared
