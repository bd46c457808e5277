"""The `gym` world: its cost is the declared return formula, it is deterministic, refuses returns
outside the declared bounds, takes continuous actions, pickles, runs on every executor, and its
certificate holds at the promised rate (Monte-Carlo, slow)."""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest

from pacplan.errors import PacplanError
from pacplan.pipeline.execution.executors import SerialExecutor, WorldSpec, make_executor
from pacplan.worlds.base import make_world
from pacplan.worlds.from_gym.world import GymWorld

CARTPOLE = {"env_id": "CartPole-v1", "return_bounds": [0, 500], "horizon": 500}
PENDULUM = {"env_id": "Pendulum-v1", "return_bounds": [-16.3 * 200, 0]}
# A balancing controller (push towards the pole's fall) and its noisy copies: long episodes.
BALANCE = np.array([0, 0, 0, 0, 0.1, 0.5, 10.0, 1.0, 0, 0], dtype=np.float32)


def _thetas(k: int, d: int = 10, scale: float = 1.0, seed: int = 0) -> np.ndarray:
    return (scale * np.random.default_rng(seed).standard_normal((k, d))).astype(np.float32)


def _raw_return(env_id: str, seed: int, action: object, horizon: int) -> float:
    """The episode return with the plain environment, the same action at every step."""
    env = gym.make(env_id)
    env.reset(seed=seed)
    total = 0.0
    for _ in range(horizon):
        _, r, terminated, truncated, _ = env.step(action)
        total += float(r)
        if terminated or truncated:
            break
    return total


def test_registered_and_built_from_options() -> None:
    world = make_world("gym", **CARTPOLE)
    assert isinstance(world, GymWorld) and world.policy_dim() == 4 * 2 + 2
    mlp = make_world("gym", **CARTPOLE, policy="mlp", hidden=8)
    assert mlp.policy_dim() == 8 * 4 + 8 + 2 * 8 + 2
    assert make_world("gym", **PENDULUM).policy_dim() == 3 * 1 + 1


def test_cost_is_the_declared_formula_on_a_hand_run_episode() -> None:
    """All-zero weights always push left (action 0); their cost is (500 − R)/500 of the raw env."""
    world = GymWorld(**CARTPOLE)
    seeds = np.array([3, 17], dtype=np.int64)
    got = world.costs(np.zeros((1, 10), np.float32), seeds)
    want = [(500 - _raw_return("CartPole-v1", int(s), 0, 500)) / 500 for s in seeds]
    assert got.shape == (2, 1) and got.dtype == np.float64
    assert got[:, 0].tolist() == want and all(0 < w < 1 for w in want)
    # A bias towards action 1 always pushes right: the same check the other way.
    right = np.zeros((1, 10), np.float32)
    right[0, 9] = 1.0
    assert world.costs(right, seeds)[:, 0].tolist() == [
        (500 - _raw_return("CartPole-v1", int(s), 1, 500)) / 500 for s in seeds]


def test_deterministic_and_independent_of_batching() -> None:
    world = GymWorld(**CARTPOLE)
    thetas = np.concatenate([BALANCE[None] + _thetas(5, scale=0.3), _thetas(5)])
    seeds = np.arange(10, 14, dtype=np.int64)
    a = world.costs(thetas, seeds)
    assert np.array_equal(a, world.costs(thetas, seeds))
    assert np.array_equal(a, GymWorld(**CARTPOLE).costs(thetas, seeds))
    one_by_one = np.stack([np.concatenate([world.costs(t[None], seeds[i:i + 1])[0]
                                           for t in thetas]) for i in range(len(seeds))])
    assert np.array_equal(a, one_by_one)
    assert a.min() < 0.1 and a.max() > 0.5  # long and short episodes both occur
    assert not np.array_equal(a[0], a[1])  # different seeds, different environments


def test_return_outside_the_bounds_is_refused_naming_seed_and_value() -> None:
    world = GymWorld(**{**CARTPOLE, "return_bounds": [0, 5]})
    with pytest.raises(PacplanError, match=r"seed 42 gave return (\d+\.\d+).*\[0\.0, 5\.0\]"):
        world.costs(BALANCE[None], np.array([42]))
    low = GymWorld(**{**CARTPOLE, "return_bounds": [100, 500]})
    with pytest.raises(PacplanError,
                       match=r"seed 7 gave return \d+\.\d+, outside.*\[100\.0, 500\.0\].*clipped"):
        low.costs(np.zeros((1, 10), np.float32), np.array([7]))


def test_bad_options_are_named() -> None:
    with pytest.raises(PacplanError, match="NoSuchEnv"):
        make_world("gym", env_id="NoSuchEnv-v0", return_bounds=[0, 1])
    with pytest.raises(PacplanError, match="R_min < R_max"):
        make_world("gym", env_id="CartPole-v1", return_bounds=[1, 1])
    with pytest.raises(PacplanError, match="unknown policy"):
        make_world("gym", **CARTPOLE, policy="rnn")
    with pytest.raises(PacplanError, match=r"expected \(k, 10\)"):
        GymWorld(**CARTPOLE).costs(np.zeros((1, 9), np.float32), np.array([0]))


def test_continuous_actions_on_pendulum() -> None:
    """Box actions: tanh into [−2, 2]; all-zero weights apply torque 0 (the box's middle)."""
    lo = -(math.pi**2 + 0.1 * 8**2 + 0.001 * 2**2)  # the worst reward of one step, ≈ −16.27
    assert -16.3 < lo < -16.2
    world = GymWorld(**PENDULUM)
    assert world.horizon == 200
    seeds = np.array([0, 5], dtype=np.int64)
    zero = world.costs(np.zeros((1, 4), np.float32), seeds)[:, 0]
    want = [-_raw_return("Pendulum-v1", int(s), np.zeros(1, np.float32), 200) / 3260
            for s in seeds]
    np.testing.assert_allclose(zero, want, rtol=0, atol=1e-12)
    c = world.costs(_thetas(6, d=4), seeds)
    assert c.shape == (2, 6) and np.all((c >= 0) & (c <= 1)) and len(np.unique(c)) == 12
    mlp = GymWorld(**PENDULUM, policy="mlp", hidden=4)
    assert mlp.costs(_thetas(2, d=mlp.policy_dim()), seeds).shape == (2, 2)


def test_a_users_policy_factory() -> None:
    world = GymWorld(**CARTPOLE, policy=f"{__name__}:_bang_bang")
    assert world.policy_dim() == 1
    seeds = np.array([3], dtype=np.int64)
    assert world.costs(np.array([[-1.0], [1.0]], np.float32), seeds)[0].tolist() == [
        (500 - _raw_return("CartPole-v1", 3, a, 500)) / 500 for a in (0, 1)]


class _BangBang:
    """One weight: push right when it is positive."""

    dim = 1

    def act(self, thetas: np.ndarray, obs: np.ndarray) -> list[int]:
        return [int(t[0] > 0) for t in thetas]


def _bang_bang(observation_space: object, action_space: object) -> _BangBang:
    return _BangBang()


def _heavy_pole(env: gym.Env, seed: int) -> None:
    """A user's randomizer: the pole's half-length comes from the seed alone."""
    env.unwrapped.length = 0.5 + 0.5 * (seed % 3)


def test_a_users_randomizer_changes_the_environment_from_the_seed() -> None:
    plain = GymWorld(**CARTPOLE)
    world = GymWorld(**CARTPOLE, randomize=f"{__name__}:_heavy_pole")
    thetas, seeds = np.zeros((1, 10), np.float32), np.array([3, 4, 5], dtype=np.int64)
    got = world.costs(thetas, seeds)
    assert got[0, 0] == plain.costs(thetas, seeds[:1])[0, 0]  # seed 3: the default length
    assert not np.array_equal(got, plain.costs(thetas, seeds))
    assert np.array_equal(got, pickle.loads(pickle.dumps(world)).costs(thetas, seeds))


def test_pickle_round_trip_gives_the_same_costs() -> None:
    world = GymWorld(**CARTPOLE)
    thetas, seeds = _thetas(4), np.arange(3, dtype=np.int64)
    before = world.costs(thetas, seeds)
    blob = pickle.dumps(world)
    assert len(blob) < 2000  # options only: no environment travels
    assert np.array_equal(pickle.loads(blob).costs(thetas, seeds), before)


@pytest.fixture(scope="module")
def pool() -> Iterator:
    with make_executor("processes", workers=2, chunk_policies=3, chunk_seeds=2) as ex:
        yield ex


def test_serial_and_processes_agree_to_the_bit(pool) -> None:
    spec = WorldSpec("gym", CARTPOLE)
    thetas = np.concatenate([BALANCE[None] + _thetas(3, scale=0.3), _thetas(4)])
    seeds = np.arange(100, 105, dtype=np.int64)
    serial = SerialExecutor(chunk_policies=3, chunk_seeds=2).cost_matrix(spec, thetas, seeds)
    assert np.array_equal(serial, GymWorld(**CARTPOLE).costs(thetas, seeds))
    assert np.array_equal(pool.cost_matrix(spec, thetas, seeds), serial)
    paired = np.stack([thetas[:4] + i for i in range(len(seeds))]).astype(np.float32)
    assert np.array_equal(pool.paired_costs(spec, paired, seeds),
                          SerialExecutor().paired_costs(spec, paired, seeds))


@pytest.mark.slow
def test_monte_carlo_validity_of_the_certificate_on_cartpole() -> None:
    """300 independent certification sets of N = 50 drawn from a pool of 4000 seeds: the
    kl-inverse bound of the bound-optimal posterior falls below its true cost at most δ of the
    time (plus a binomial allowance). The distribution certified is the pool's, so the true
    cost is the posterior's cost on the whole pool, exactly (a pool of 20,000 seeds made the
    same test five times slower: only the number of draws sets its power)."""
    from pacplan.pacbayes.posterior import optimize_gibbs

    m, n_big, n_cert, draws, delta = 8, 4_000, 50, 300, 0.05
    world = GymWorld(**{**CARTPOLE, "horizon": 40, "return_bounds": [0, 40]})
    thetas = BALANCE[None] + _thetas(m, scale=0.6, seed=1)
    big = world.costs(thetas, np.arange(1_000_000, 1_000_000 + n_big, dtype=np.int64))
    true = big.mean(axis=0)
    assert true.max() - true.min() > 0.1  # the policies really differ
    rng = np.random.default_rng(0)
    fails = 0
    for _ in range(draws):
        rows = rng.choice(n_big, size=n_cert, replace=False)
        post = optimize_gibbs(big[rows], delta=delta, bound="klinv")
        fails += int(post.value < float(post.p @ true))
    allowance = delta * draws + 3 * math.sqrt(draws * delta * (1 - delta))
    print(f"Monte-Carlo: {fails} failures in {draws} draws (δ {delta}, allowed {allowance:.1f})")
    assert fails <= allowance


def _raw_terminated(seed: int, action: int, horizon: int) -> bool:
    """Whether CartPole, driven by one constant action, terminates within `horizon` steps."""
    env = gym.make("CartPole-v1", max_episode_steps=horizon)
    env.reset(seed=seed)
    for _ in range(horizon):
        _, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            return bool(terminated)
    return False


def test_cost_from_termination_is_the_raw_envs_failure() -> None:
    """cost "terminated": 1 exactly when the raw env terminates before the horizon."""
    zeros = np.zeros((1, 10), np.float32)  # argmax of zeros: always action 0 (push left)
    for horizon in (5, 60):
        world = GymWorld("CartPole-v1", policy="linear", horizon=horizon, cost="terminated")
        costs = world.costs(zeros, np.arange(6))[:, 0]
        expected = [float(_raw_terminated(int(s), 0, horizon)) for s in range(6)]
        assert costs.tolist() == expected
    assert set(expected) == {1.0}  # at 60 steps pushing left always drops the pole
    short = GymWorld("CartPole-v1", policy="linear", horizon=5, cost="terminated")
    assert short.costs(zeros, np.arange(6)).max() == 0.0  # 5 steps are too few to fall


class _Reach(gym.Env):
    """Succeeds (info is_success) when action 1 is taken on the seed's lucky step."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t, self.lucky = 0, int(self.np_random.integers(0, 3))
        return np.zeros(1, np.float32), {}

    def step(self, action: int):
        self.t += 1
        done = self.t >= 3
        success = bool(action == 1 and self.t - 1 == self.lucky)
        return np.zeros(1, np.float32), 0.0, success or done, False, {"is_success": success}


def test_cost_from_success_reads_is_success() -> None:
    if "pacplan-test/Reach-v0" not in gym.registry:
        gym.register("pacplan-test/Reach-v0", entry_point=_Reach, max_episode_steps=3)
    world = GymWorld("pacplan-test/Reach-v0", policy="linear", cost="success")
    always_one = np.array([[0.0, 0.0, 0.0, 1.0]], np.float32)  # bias favours action 1
    always_zero = np.array([[0.0, 0.0, 1.0, 0.0]], np.float32)
    assert world.costs(always_one, np.arange(5)).max() == 0.0
    assert world.costs(always_zero, np.arange(5)).min() == 1.0


def test_return_bounds_are_required_only_for_the_return_cost() -> None:
    with pytest.raises(PacplanError, match=r"return_bounds .* is needed"):
        GymWorld("CartPole-v1")
    with pytest.raises(PacplanError, match="unknown gym world: option cost"):
        GymWorld("CartPole-v1", return_bounds=[0, 500], cost="reward")
