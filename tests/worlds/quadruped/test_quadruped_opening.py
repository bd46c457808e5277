"""The climbing-opening teacher (`worlds.quadruped.opening`): the rule's targets on a walked
episode are the opening's η exactly where it opens and the base net's own η elsewhere (each
recomputed here from the recorded observation), and the fit moves the net towards the targets
while it keeps the base net's outputs where the rule does."""

from __future__ import annotations

import numpy as np
import pytest

from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.opening import (
    ETA_EDGE,
    OpeningRule,
    OpeningStates,
    fit,
    walk_and_label,
)
from pacplan.worlds.quadruped.policy import POLICY_DIM, gait_theta, policy_action, policy_output


def test_the_opening_eta_maps_to_the_opening_gait() -> None:
    rule = OpeningRule()
    got = GaitParams.from_policy_output(rule.opening_eta())
    assert abs(got.a1 - rule.gait.a1) <= 0.8 * ETA_EDGE + 1e-12
    assert got.a2 == pytest.approx(rule.gait.a2) and got.omega == pytest.approx(rule.gait.omega)
    assert got.a_st <= ETA_EDGE
    assert [rule.opens(True, k) for k in (0, 5, 6)] == [True, True, False]
    assert not rule.opens(False, 0)


@pytest.mark.parametrize("in_stratum", [True, False])
def test_the_rule_labels_what_it_walks(in_stratum: bool) -> None:
    world = QuadrupedWorld(variant="paper-code", physics="mujoco")
    base = gait_theta(GaitParams(a1=0.9, a2=0.9, a_st=0.0, omega=25.0))
    base[10:60] = np.random.default_rng(0).normal(0, 0.05, 50)  # a net that sees, a little
    rule = OpeningRule(primitives=3)
    states, cost = walk_and_label(world, rule, base, None, 7, in_stratum)
    world.close()
    assert 0.0 <= cost <= 1.0 and len(states) >= 4
    np.testing.assert_array_equal(states.primitive, np.arange(len(states)))
    opens = np.arange(len(states)) < 3 if in_stratum else np.zeros(len(states), bool)
    np.testing.assert_array_equal(states.opens, opens)
    for k in range(len(states)):
        want = (rule.opening_eta() if opens[k]
                else policy_action(base, states.depth[k], states.proprio[k]))
        np.testing.assert_allclose(states.target[k], want, rtol=0, atol=1e-7)


def test_the_fit_learns_the_opening_where_it_is_asked_and_keeps_the_base_elsewhere() -> None:
    rng = np.random.default_rng(1)
    k = 120
    depth = rng.uniform(0.5, 4.0, (k, 50, 50)).astype(np.float32)
    asked = np.arange(k) < 40
    depth[asked, 30:, :] -= 0.4  # what the rule's states look like: something near
    proprio = rng.normal(0, 1, (k, 22)).astype(np.float32)
    base = rng.normal(0, 0.02, POLICY_DIM)
    rule = OpeningRule()
    target = np.array([rule.opening_eta() if a else policy_output(base, d, p)
                       for a, d, p in zip(asked, depth, proprio, strict=True)])
    data = OpeningStates(np.zeros(k, np.int64), np.arange(k), depth, proprio, target, asked)
    theta, loss = fit(base, base, data, opening_weight=3.0, pull=1e-6, iterations=200)
    after = np.array([policy_output(theta, d, p) for d, p in zip(depth, proprio, strict=True)])
    before = np.array([policy_output(base, d, p) for d, p in zip(depth, proprio, strict=True)])
    gap = lambda eta: np.abs(eta - target).mean(axis=1)  # noqa: E731
    assert gap(after)[asked].mean() < 0.25 * gap(before)[asked].mean()
    assert gap(after)[~asked].mean() < 0.05
    assert np.isfinite(loss) and theta.shape == (POLICY_DIM,)
