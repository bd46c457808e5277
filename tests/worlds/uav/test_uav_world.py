"""UAVWorld through the World protocol: shape, range, determinism, options, pickling."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds import World, make_world
from pacplan.worlds.uav import UAVWorld, spec


def _thetas(k: int, sigma: float = 0.1, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, sigma, (k, spec.POLICY_DIM)).astype(np.float32)


def test_protocol_shape_range_and_determinism() -> None:
    world = make_world("uav", compile=False)
    assert isinstance(world, World) and world.policy_dim() == 13_943
    th, seeds = _thetas(4), np.arange(6, dtype=np.int64)
    c1 = world.costs(th, seeds)
    assert c1.shape == (6, 4) and c1.dtype == np.float64
    assert np.all((c1 >= 0) & (c1 <= 1))
    c2 = make_world("uav", compile=False).costs(th, seeds)
    np.testing.assert_array_equal(c1, c2)
    # chunking changes nothing
    np.testing.assert_array_equal(
        c1, UAVWorld(env_chunk=2, policy_chunk=3, render_chunk=7, compile=False).costs(th, seeds)
    )
    # a column of one policy alone equals its column in the batch
    np.testing.assert_array_equal(c1[:, 2:3], world.costs(th[2:3], seeds))


def test_bullet_is_deterministic() -> None:
    world = UAVWorld(simulator="bullet")
    th, seeds = _thetas(2), np.array([3, 4])
    np.testing.assert_array_equal(world.costs(th, seeds), world.costs(th, seeds))


def test_costs_are_collision_times() -> None:
    res = UAVWorld(compile=False).rollouts(_thetas(3), np.arange(8))
    hit = res.checks > 0
    np.testing.assert_allclose(res.costs[hit], 1 - res.checks[hit] * 0.05 / 12)
    assert np.all(res.costs[~hit] == 0)
    # a rollout that collided stops choosing primitives
    for i, j in zip(*np.nonzero(hit), strict=True):
        step = (res.checks[i, j] - 1) // 20
        assert np.all(res.prims[i, j, step + 1 :] == -1) and res.prims[i, j, step] >= 0


def test_use_net_false_ignores_theta() -> None:
    w = UAVWorld(use_net=False, compile=False)
    seeds = np.arange(5)
    a = w.costs(_thetas(2, sigma=3.0), seeds)
    b = w.costs(np.zeros((2, spec.POLICY_DIM), np.float32), seeds)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        b, UAVWorld(compile=False).costs(np.zeros((2, spec.POLICY_DIM)), seeds)
    )


def test_pickles_by_spec_and_validates() -> None:
    w = UAVWorld(net_scale=2.0, env_chunk=4, compile=False)
    w.costs(_thetas(1), [0])  # builds the simulator
    w2 = pickle.loads(pickle.dumps(w))
    assert w2.options() == w.options() and w2._sim is None
    with pytest.raises(PacplanError):
        UAVWorld(simulator="mujoco")
    with pytest.raises(PacplanError):
        w.costs(np.zeros((2, 5)), [0])
    with pytest.raises(PacplanError):
        w.costs(_thetas(1), [-3])


def test_trajectory_matches_rollout() -> None:
    w = UAVWorld(compile=False)
    th = _thetas(1, seed=3)[0]
    for seed in range(6):
        tr = w.trajectory(th, seed)
        res = w.rollouts(th[None], [seed])
        assert tr.checks == res.checks[0, 0] and tr.cost == res.costs[0, 0]
        np.testing.assert_array_equal(tr.positions[0], spec.START)
        if tr.checks:
            assert len(tr.positions) == tr.checks + 1
        else:
            assert len(tr.positions) == 241
            assert tr.positions[-1][1] == pytest.approx(15.0)


@pytest.mark.slow
def test_compiled_matches_eager() -> None:
    """torch.compile changes at most the last float bit: costs agree except at rare exact
    near-ties between two primitives."""
    th, seeds = _thetas(20, sigma=0.2), np.arange(300, 340)
    eager = UAVWorld(compile=False).costs(th, seeds)
    fused = UAVWorld(compile=True).costs(th, seeds)
    assert (eager == fused).mean() >= 0.99
    assert abs(eager.mean() - fused.mean()) < 0.005


def test_a_cuda_device_this_machine_lacks_is_one_clear_error() -> None:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    name = "cuda" if count == 0 else f"cuda:{count}"  # none here, or one past the last
    world = UAVWorld(device=name, compile=False)
    with pytest.raises(PacplanError, match=f"UAV device '{name}'"):
        world.costs(_thetas(1), np.arange(1, dtype=np.int64))
