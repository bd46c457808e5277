"""Leg model, sine gait and the 944-weight policy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds.quadruped.gait import (
    NEUTRAL_MOTOR_ANGLES,
    GaitParams,
    gait_actions,
    leg_model_to_motor_angles,
)
from pacplan.worlds.quadruped.policy import POLICY_DIM, policy_output, unpack


def test_leg_model_neutral_pose_and_components() -> None:
    # zero swing and extension: every motor at π − 1.5·π/4 = 5π/8
    np.testing.assert_allclose(NEUTRAL_MOTOR_ANGLES, np.full(8, 5 * math.pi / 8))
    for leg in range(4):
        m = [2 * leg, 2 * leg + 1]
        swing = np.zeros(8)
        swing[4 + leg] = 0.4
        d = leg_model_to_motor_angles(swing) - NEUTRAL_MOTOR_ANGLES
        # swing turns both motors of the leg by −(π/4)·s and nothing else
        np.testing.assert_allclose(d[m], -math.pi / 4 * 0.4)
        assert np.count_nonzero(np.abs(d) > 1e-12) == 2
        ext = np.zeros(8)
        ext[leg] = 0.4
        d = leg_model_to_motor_angles(ext) - NEUTRAL_MOTOR_ANGLES
        # extension turns them apart by ±(π/4)·e, mirrored between left and right legs
        assert d[m[0]] == pytest.approx(-d[m[1]])
        assert abs(d[m[0]]) == pytest.approx(math.pi / 4 * 0.4)
        first_sign = 1.0 if leg < 2 else -1.0
        assert np.sign(d[m[0]]) == first_sign


def test_leg_model_is_batched() -> None:
    rng = np.random.default_rng(0)
    acts = rng.uniform(-1, 1, (5, 8))
    batched = leg_model_to_motor_angles(acts)
    for i in range(5):
        np.testing.assert_allclose(batched[i], leg_model_to_motor_angles(acts[i]))


def test_gait_pattern_and_amplitudes() -> None:
    g = GaitParams(a1=0.6, a2=0.3, a_st=0.1, omega=30.0)
    phase = np.array([math.pi / 2])
    u = gait_actions(g, phase)[0]
    # [u1, u2, u2, u1, u3, u4, u4, u3] with u2, u4 half a cycle behind
    np.testing.assert_allclose(u, [0.7, -0.5, -0.5, 0.7, 0.3, -0.3, -0.3, 0.3], atol=1e-12)
    np.testing.assert_allclose(gait_actions(g, np.array([0.0]))[0], 0.0, atol=1e-12)


def test_policy_output_map_matches_design() -> None:
    g = GaitParams.from_policy_output(np.array([0.0, 1.0, 0.5, 1.0]))
    assert (g.a1, g.a2, g.omega) == pytest.approx((0.2, 1.0, 30.0))
    assert g.a_st == pytest.approx(0.0)  # capped by 1 − a2
    g = GaitParams.from_policy_output(np.array([0.5, 0.25, 1.0, 0.9]))
    assert (g.a1, g.a2, g.omega) == pytest.approx((0.6, 0.4, 40.0))
    assert g.a_st == pytest.approx(0.4)  # min(0.9, 1 − 0.6, 1 − 0.4)
    # every leg-model command stays in [−1, 1] for any η
    rng = np.random.default_rng(1)
    for eta in rng.uniform(0, 1, (200, 4)):
        g = GaitParams.from_policy_output(eta)
        assert 0.2 <= g.a1 <= 1.0 and 0.2 <= g.a2 <= 1.0 and 20.0 <= g.omega <= 40.0
        assert 0.0 <= g.a_st <= min(1 - g.a1, 1 - g.a2) + 1e-12
        u = gait_actions(g, np.linspace(0, 2 * math.pi, 64))
        assert np.abs(u).max() <= 1.0 + 1e-12


def test_policy_output_is_the_inverse_of_the_map() -> None:
    rng = np.random.default_rng(2)
    for eta in rng.uniform(0, 1, (200, 4)):
        g = GaitParams.from_policy_output(eta)
        back = GaitParams.from_policy_output(g.policy_output())
        assert (back.a1, back.a2, back.omega, back.a_st) == pytest.approx(
            (g.a1, g.a2, g.omega, g.a_st), abs=1e-12)
    # outside the map's range, unclipped: the caller decides (gait_theta refuses it)
    assert GaitParams(0.1, 0.5, 0.0, 30.0).policy_output()[0] == pytest.approx(-0.125)


def test_policy_has_944_weights_and_matches_torch_layout() -> None:
    torch = pytest.importorskip("torch")
    assert POLICY_DIM == 944
    conv = torch.nn.Conv2d(1, 2, kernel_size=5, stride=5)
    lin = torch.nn.Linear(222, 4)
    theta = torch.cat([p.detach().reshape(-1) for p in (*conv.parameters(), *lin.parameters())])
    assert theta.numel() == POLICY_DIM
    rng = np.random.default_rng(2)
    depth = rng.uniform(0.1, 10.0, (50, 50)).astype(np.float32)
    proprio = rng.normal(size=22).astype(np.float32)
    with torch.no_grad():
        feats = torch.tanh(conv(torch.from_numpy(depth)[None, None])).reshape(1, -1)
        expected = torch.sigmoid(lin(torch.cat([feats, torch.from_numpy(proprio)[None]], 1)))
    got = policy_output(theta.numpy(), depth, proprio)
    np.testing.assert_allclose(got, expected.numpy()[0], rtol=1e-5, atol=1e-6)
    assert np.all((got > 0) & (got < 1))


def test_policy_rejects_wrong_size() -> None:
    with pytest.raises(PacplanError):
        unpack(np.zeros(943))


def test_gait_theta_runs_its_gait_whatever_the_policy_sees() -> None:
    from pacplan.worlds.quadruped.policy import gait_theta

    rng = np.random.default_rng(0)
    for target in (GaitParams(0.5, 0.5, 0.0, 30.0), GaitParams(0.3, 0.9, 0.05, 22.0)):
        theta = gait_theta(target)
        assert theta.shape == (POLICY_DIM,) and np.count_nonzero(theta) <= 4
        for _ in range(5):
            eta = policy_output(theta, rng.uniform(0, 10, (50, 50)), rng.normal(0, 10, 22))
            got = GaitParams.from_policy_output(eta)
            assert got.a1 == pytest.approx(target.a1, abs=1e-9)
            assert got.a2 == pytest.approx(target.a2, abs=1e-9)
            assert got.omega == pytest.approx(target.omega, abs=1e-9)
            # a_st = 0 cannot be reached by a sigmoid: it becomes the floor, 0.0025
            assert got.a_st == pytest.approx(max(target.a_st, 0.0025), abs=1e-9)
    with pytest.raises(PacplanError, match="outside the gaits"):
        gait_theta(GaitParams(0.1, 0.5, 0.0, 30.0))


def test_shipped_gait_init_file_is_the_reference_gait() -> None:
    from pacplan.io.weights import load_theta
    from pacplan.presets import PRIORS, presets_dir
    from pacplan.worlds.quadruped.policy import gait_theta

    path = presets_dir() / PRIORS / "quadruped-gait-init.safetensors"
    expected = gait_theta(GaitParams(0.5, 0.5, 0.0, 30.0)).astype(np.float32)
    np.testing.assert_array_equal(load_theta(path, POLICY_DIM), expected)
