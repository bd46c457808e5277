"""The simulated quadruped: time base, walking, falls, costs and determinism."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pybullet
import pytest

from pacplan.errors import PacplanError
from pacplan.worlds import make_world
from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.episode import RolloutConfig, cost_from_displacement
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import fixed_gait_controller, rollout
from pacplan.worlds.quadruped.sim import MinitaurSim
from pacplan.worlds.quadruped.terrain import sample_terrain

STRAIGHT = GaitParams(a1=0.5, a2=0.5, a_st=0.0, omega=30.0)


@pytest.fixture(scope="module")
def sim() -> Iterator[MinitaurSim]:
    s = MinitaurSim()
    yield s
    s.close()


def test_primitive_lasts_half_a_second_of_simulated_time(sim: MinitaurSim) -> None:
    """Checked against the simulator's own clock: the engine's time step times the number of
    physics steps, and a body in free fall inside the same simulation."""
    sim.reset(sample_terrain(0, 0.0))
    assert sim.engine_time_step() == pytest.approx(0.002)
    ball = pybullet.createMultiBody(
        baseMass=1.0,
        baseCollisionShapeIndex=pybullet.createCollisionShape(
            pybullet.GEOM_SPHERE, radius=0.05, physicsClientId=sim.cid
        ),
        basePosition=[0.0, 3.0, 5.0],
        physicsClientId=sim.cid,
    )
    pybullet.changeDynamics(ball, -1, linearDamping=0.0, physicsClientId=sim.cid)
    outcome = sim.run_primitive(STRAIGHT, 0.5)
    assert not outcome.fell
    assert outcome.steps * sim.engine_time_step() == pytest.approx(0.5)
    assert sim.time == pytest.approx(0.5)
    z = pybullet.getBasePositionAndOrientation(ball, physicsClientId=sim.cid)[0][2]
    # ½·g·t² with g = 10 m/s²: 1.25 m in 0.5 s (semi-implicit Euler adds g·dt·t/2 = 5 mm)
    assert 5.0 - z == pytest.approx(1.25, abs=0.01)


def test_straight_gait_walks_on_flat_ground(sim: MinitaurSim) -> None:
    flat = sample_terrain(0, max_slope_deg=0.0)
    assert flat.height(np.linspace(0, 10, 101)).max() == 0.0
    result = rollout(
        sim,
        flat,
        fixed_gait_controller(STRAIGHT),
        RolloutConfig(horizon_s=5.0),
        record=True,
        needs_depth=False,
    )
    assert result.sim_time == pytest.approx(5.0)
    assert not result.fell
    assert result.dx >= 0.5
    assert abs(result.path[-1, 2]) < 0.5 * result.dx  # mostly straight ahead
    assert result.cost == pytest.approx(1.0 - result.dx / 6.0)


def test_a_fall_ends_the_rollout(sim: MinitaurSim) -> None:
    """Knock the robot onto its side during the first decision: the rollout must stop at the
    first check (0.01 s), flag the fall and still return a cost in [0, 1]."""
    calls = []

    def knock_over(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
        calls.append(1)
        orn = pybullet.getQuaternionFromEuler([1.6, 0.0, 0.0])
        pybullet.resetBasePositionAndOrientation(
            sim.robot, [0.0, 0.0, 0.3], orn, physicsClientId=sim.cid
        )
        return STRAIGHT

    result = rollout(sim, sample_terrain(0), knock_over, needs_depth=False)
    assert result.fell and not result.finished
    assert len(calls) == 1 and result.primitives == 1
    assert result.sim_time == pytest.approx(0.01)
    assert 0.0 <= result.cost <= 1.0


def test_finish_line_ends_the_rollout(sim: MinitaurSim) -> None:
    result = rollout(
        sim,
        sample_terrain(0, 0.0),
        fixed_gait_controller(STRAIGHT),
        RolloutConfig(finish_dx=0.3),
        needs_depth=False,
    )
    assert result.finished and not result.fell
    assert result.sim_time < 10.0
    assert result.cost == 0.0


def test_cost_is_clipped() -> None:
    assert cost_from_displacement(-1.0, 6.0) == 1.0
    assert cost_from_displacement(7.0, 6.0) == 0.0
    assert cost_from_displacement(3.0, 6.0) == pytest.approx(0.5)


def test_depth_image_sees_terrain_ahead(sim: MinitaurSim) -> None:
    sim.reset(sample_terrain(5))
    depth = sim.depth_image()
    assert depth.shape == (50, 50) and depth.dtype == np.float32
    assert np.all((depth > 0) & (depth <= 10.0))
    assert np.all(depth[:20] == pytest.approx(10.0))  # sky above the horizon reads far
    ground = depth[30:40, 20:30]
    assert ground.max() < 3.0  # the ground just ahead is close
    # lower rows look nearer (the camera is pitched down over level ground)
    assert depth[38, 25] < depth[30, 25]
    proprio = sim.proprioception()
    assert proprio.shape == (22,)
    assert proprio[18] == pytest.approx(0.2, abs=0.05)  # torso height


def test_world_costs_shape_range_and_determinism() -> None:
    world = make_world("quadruped", max_slope_deg=23.3, horizon_s=1.0)
    assert isinstance(world, QuadrupedWorld) and world.policy_dim() == POLICY_DIM
    rng = np.random.default_rng(0)
    thetas = rng.normal(0, 0.3, (2, POLICY_DIM)).astype(np.float32)
    seeds = np.array([4, 9], dtype=np.int64)
    c1 = world.costs(thetas, seeds)
    assert c1.shape == (2, 2) and c1.dtype == np.float64
    assert np.all((c1 >= 0) & (c1 <= 1))
    assert np.all(c1 < 1.0)  # one second of walking makes some progress
    # same seed, same cost: repeated, in another order, in a fresh world
    np.testing.assert_array_equal(world.costs(thetas[::-1], seeds[::-1]), c1[::-1, ::-1])
    fresh = QuadrupedWorld(max_slope_deg=23.3, horizon_s=1.0)
    np.testing.assert_array_equal(fresh.costs(thetas[1:], seeds[:1]), c1[:1, 1:])


def test_world_validates_inputs() -> None:
    world = QuadrupedWorld()
    with pytest.raises(PacplanError):
        world.costs(np.zeros((1, 10), np.float32), np.array([0]))
    with pytest.raises(PacplanError):
        QuadrupedWorld(max_slope_deg=90.0)
    with pytest.raises(PacplanError):
        QuadrupedWorld(primitive_s=0.0031)
    with pytest.raises(PacplanError):
        QuadrupedWorld(horizon_s=10.2)
    assert world._sim is None  # construction opened no simulator


def test_world_pickles_without_its_simulator() -> None:
    import pickle

    world = QuadrupedWorld(horizon_s=0.5)
    world.costs(np.zeros((1, POLICY_DIM), np.float32), np.array([1]))
    clone = pickle.loads(pickle.dumps(world))
    assert clone._sim is None and clone.max_slope_deg == world.max_slope_deg


@pytest.mark.parametrize("mounted", [False, True])
def test_mounted_contacts_option(mounted: bool) -> None:
    """The `minitaur` robot: in the clean model the chassis does not touch the motors bolted to
    it; the public contact model (`mounted_contacts=True`) has those permanent self-contacts."""
    from pacplan.worlds.quadruped.sim import PhysicsConfig

    s = MinitaurSim(PhysicsConfig(robot="minitaur", mounted_contacts=mounted))
    s.reset(sample_terrain(0, 0.0))
    pybullet.performCollisionDetection(physicsClientId=s.cid)
    self_contacts = pybullet.getContactPoints(s.robot, s.robot, physicsClientId=s.cid)
    n_links = pybullet.getNumJoints(s.robot, physicsClientId=s.cid)
    if mounted:
        assert n_links == 26 and len(self_contacts) >= 4
    else:
        assert n_links == 16 and len(self_contacts) == 0
    s.close()


# sha256 of costs/cert.npy of the ES-only prior's stages, shipped as results/quadruped before:
# N = 1000 (commit 9a00e35) and N = 2000 (commit 5549e43). Its N = 4000 result, computed across
# many resumed invocations of quadruped-paper and now results/quadruped-es, must begin with them
# byte for byte. The taught prior's stages are pinned the same way: N = 1000 (quadruped-paper-n1000,
# commit 14df664) and N = 2000 (quadruped-paper-n2000, commit ed2f95e): results/quadruped, its
# N = 4000 run (quadruped-paper), must begin with them byte for byte.
N1000_STAGE_CERT_SHA256 = "8c6ab552a9e8dd111ac99c914ef1b34f00bf750e3d567d1be4774b95035ed125"
N2000_STAGE_CERT_SHA256 = "6ecbce2945fddc81bd0eeba734ee52932feb5077604f3c30022b72009649ea55"
TAUGHT_N1000_STAGE_CERT_SHA256 = "5a5e6069662b7ad5163802581a503d6a9e3d0908a9d2996774e6f472842b1c3a"
TAUGHT_N2000_STAGE_CERT_SHA256 = "b555e8ae7228bcb44da978facc515688169cb26f8af73636ea382db0eb4f9ded"


def test_shipped_quadruped_result_verifies() -> None:
    """results/quadruped-es (quadruped-paper with the ES-only prior, N = 4000), results/quadruped
    (quadruped-paper with the shipped taught prior, N = 4000) and results/quadruped-quick: each
    certificate recomputes from its stored matrices, lies above the test cost's lower confidence
    limit, states the paper's robot, and its policies come from the prior it names.
    The resumed rows are what one uninterrupted run computes: the first 1000 and 2000 are byte
    for byte those of the N = 1000 and N = 2000 stages shipped before, and so are their
    certificates."""
    import hashlib
    from pathlib import Path

    from pacplan.io.files import npy_bytes
    from pacplan.pipeline.provenance import verify_certificate as verify
    from pacplan.presets import shipped_priors

    repo = Path(__file__).resolve().parents[3]
    priors = {name: hashlib.sha256(path.read_bytes()).hexdigest()
              for name, path in shipped_priors().items()}
    for run, sizes, engine, prior in (
            ("quadruped-es", (50, 4000, 1000), "mujoco", "quadruped-es"),  # quadruped-paper
            ("quadruped", (50, 4000, 1000), "mujoco", "quadruped"),  # quadruped-paper
            ("quadruped-quick", (5, 40, 20), "bullet", "quadruped")):
        c = verify(repo / "results" / run / "certificate.json")
        assert (c.m, c.n, c.test_n) == sizes
        options = c.provenance["world"]["options"]
        assert options["robot"] == "derpy"  # the paper's robot, recorded
        assert options.get("physics", "bullet") == engine
        assert c.certified >= c.test_ci[0]
        assert c.provenance["prior_sha256"] == priors[prior], run

    def rows_sha256(run: str, rows: int) -> str:
        cert = np.load(repo / "results" / run / "costs" / "cert.npy", allow_pickle=False)
        assert cert.shape[0] >= rows
        return hashlib.sha256(npy_bytes(cert[:rows])).hexdigest()

    assert rows_sha256("quadruped-es", 1000) == N1000_STAGE_CERT_SHA256
    assert rows_sha256("quadruped-es", 2000) == N2000_STAGE_CERT_SHA256
    assert rows_sha256("quadruped", 1000) == TAUGHT_N1000_STAGE_CERT_SHA256
    assert rows_sha256("quadruped", 2000) == TAUGHT_N2000_STAGE_CERT_SHA256
    # as the stages shipped them; the teacher row's resume recomputed the certificates with the
    # posterior search of issue 36, which decides nothing below 1e-9 (they moved by 3e-10)
    for n, certified in ((1000, 0.3051801932267535), (2000, 0.2915777569784299)):
        staged = verify(repo / "results" / "quadruped-es" / "certificates" / f"N{n}.json")
        assert abs(staged.certified - certified) < 1e-9
    # the taught stages' certificates, as shipped at commits 14df664 (N = 1000), ed2f95e (2000)
    for n, certified in ((1000, 0.29565140837830595), (2000, 0.2800036583800498)):
        staged = verify(repo / "results" / "quadruped" / "certificates" / f"N{n}.json")
        assert abs(staged.certified - certified) < 1e-9
