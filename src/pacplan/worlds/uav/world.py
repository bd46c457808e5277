"""UAVWorld: the obstacle-field world behind the `World` protocol.

The constructor only stores options (cheap and picklable, since worker processes rebuild worlds
from (name, options)); simulators are built on first use and dropped when pickled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.validation import check_choice, check_policies, check_seeds
from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.families import PAPER, PolicyFamily, policy_family
from pacplan.worlds.uav.results import RolloutResult
from pacplan.worlds.uav.scene import Scene, sample_scene
from pacplan.worlds.uav.scene_sim import SIMULATORS

PLANNERS = ("policy", "teacher")


@dataclass
class Trajectory:
    """One flight, for figures and inspection.

    positions (M, 3): the start and every collision-check position flown, up to and including
    the colliding one; decisions (S, 3): positions where a primitive was chosen; prims (S,);
    checks: first colliding check (0 = none); cost.
    """

    seed: int
    scene: Scene
    positions: np.ndarray
    decisions: np.ndarray
    prims: np.ndarray
    checks: int
    cost: float

    @property
    def collision_point(self) -> np.ndarray | None:
        """Robot centre at the first colliding check, or None."""
        return self.positions[-1] if self.checks else None


class UAVWorld:
    """Quadrotor-like point robot flying 12 motion primitives through a cylinder field.

    Options (all from a config):
      simulator: "batched" (PyTorch, default) or "bullet" (PyBullet reference).
      device: "cpu", "cuda" or "auto" (batched only).
      net_scale: weight of the residual net's scores against the Depth Filter's (metres).
      use_net: False flies the Depth Filter alone (θ is ignored): the baseline policy.
      env_chunk, policy_chunk, render_chunk: environments and policies per rollout chunk and
        frames per render call; they bound memory (≈ env_chunk · policy_chunk images and net
        feature maps alive at once) whatever n and k are. They do not change results (eager);
        compiled kernels are built for one (render_chunk, env_chunk) shape, so keep those
        fixed within a run like `compile`.
      compile: fuse the batched render kernel with torch.compile (default; the first call in
        a fresh cache compiles for ≈20-40 s on 2 cores, later processes hit torch's on-disk
        cache). Compiled and eager kernels can differ in the last float bit, which can flip an
        exact near-tie between primitives, so keep it fixed within a run.
      threads: torch CPU threads while rolling out (default 1, 0 = torch's default): on a
        shared machine one thread per process is 3-4× faster than two (see batched.py); run
        several worker processes for more cores.
      obstacles, radius_scale: a shifted obstacle distribution (more cylinders; radii times
        radius_scale), batched simulator only, to test a deployed planner off its certified
        world (docs/monitor.md). The defaults (20, 1.0) are the certified world.
      planner: "policy" (default) flies θ; "teacher" flies the privileged planner's optimal
        plan (`teacher.plans`: it sees the obstacles, θ is ignored), a baseline row: the
        world's floor.
      policy, policy_width: the policy family θ parametrises (`families`): "paper" (default,
        the paper's 13,943-weight net, which takes no width) or "conv", a convnet of the same
        residual-to-Depth-Filter form whose size is policy_width, one of 1, 2, 4 (default), 8
        or 16 (34,380 … 507,465 weights). `policy_dim()` is the family's size.
    """

    name = "uav"
    PRIOR_OPTIONS = ("policy", "policy_width")
    """Options a prior file's recorded world supplies when a config leaves them unset
    (`pacplan.pipeline.prior.prior_world.adopt_prior_options`): its policy family."""

    @classmethod
    def check_options(cls, **options: Any) -> None:
        """Refuse what building this world would refuse (`planner: teacher` with other
        obstacles) when a run starts: building makes no simulator, and a baseline's world is
        otherwise first built after the cost matrices."""
        cls(**options)

    @staticmethod
    def warmup_note(simulator: str = "batched", compile: bool = True, **_: Any) -> str | None:
        """Said before a run's first rollouts: compiling is silent and lands in a stage's time."""
        if simulator != "batched" or not compile:
            return None
        return ("uav world: the first rollouts in each process compile the batched kernels "
                "with torch.compile (≈ 20-40 s on a fresh cache, counted in that stage's time; "
                "later processes reuse torch's on-disk cache)")

    def __init__(
        self,
        simulator: str = "batched",
        device: str = "cpu",
        net_scale: float = spec.DEFAULT_NET_SCALE,
        use_net: bool = True,
        env_chunk: int = 32,
        render_chunk: int = 64,
        compile: bool = True,
        threads: int = 1,
        policy_chunk: int = 256,
        obstacles: int = spec.N_OBSTACLES,
        radius_scale: float = 1.0,
        planner: str = "policy",
        policy: str = PAPER,
        policy_width: int | None = None,
    ) -> None:
        self.family: PolicyFamily = policy_family(policy, policy_width)
        check_choice("UAV simulator", simulator, SIMULATORS)
        check_choice("UAV planner", planner, PLANNERS)
        if planner == "teacher" and (obstacles, radius_scale) != (spec.N_OBSTACLES, 1.0):
            raise PacplanError("planner: teacher plans only in the certified UAV world")
        if isinstance(obstacles, bool) or not isinstance(obstacles, int) or obstacles < 1:
            raise PacplanError(f"obstacles must be a whole number ≥ 1, got {obstacles!r}")
        if not np.isfinite(radius_scale) or radius_scale <= 0:
            raise PacplanError(f"radius_scale must be a finite number > 0, got {radius_scale}")
        if simulator != "batched" and (obstacles, radius_scale) != (spec.N_OBSTACLES, 1.0):
            raise PacplanError("obstacles and radius_scale need the batched simulator")
        if device not in ("cpu", "cuda", "auto") and not str(device).startswith("cuda:"):
            raise PacplanError(f"unknown device {device!r}; use cpu, cuda or auto")
        if not np.isfinite(net_scale) or net_scale < 0:
            raise PacplanError(f"net_scale must be a finite number ≥ 0, got {net_scale}")
        if min(env_chunk, render_chunk, policy_chunk) < 1:
            raise PacplanError("env_chunk, policy_chunk and render_chunk must be ≥ 1")
        self.simulator = simulator
        self.device = device
        self.net_scale = float(net_scale)
        self.use_net = bool(use_net)
        self.env_chunk = int(env_chunk)
        self.render_chunk = int(render_chunk)
        self.compile = bool(compile)
        self.threads = int(threads)
        self.policy_chunk = int(policy_chunk)
        self.obstacles = int(obstacles)
        self.radius_scale = float(radius_scale)
        self.planner = planner
        self._sim: Any = None

    def options(self) -> dict[str, Any]:
        """The keyword options that rebuild this world."""
        return {
            "simulator": self.simulator,
            "device": self.device,
            "net_scale": self.net_scale,
            "use_net": self.use_net,
            "env_chunk": self.env_chunk,
            "render_chunk": self.render_chunk,
            "compile": self.compile,
            "threads": self.threads,
            "policy_chunk": self.policy_chunk,
            "obstacles": self.obstacles,
            "radius_scale": self.radius_scale,
            "planner": self.planner,
            **self.family.options(),
        }

    def __getstate__(self) -> dict[str, Any]:
        return self.options()

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]

    def __repr__(self) -> str:
        opts = ", ".join(f"{k}={v!r}" for k, v in self.options().items())
        return f"UAVWorld({opts})"

    def policy_dim(self) -> int:
        return self.family.dim

    def policy_label(self) -> str:
        """The policy family, as refusals of a wrong-sized prior name it."""
        return self.family.label()

    @property
    def sim(self) -> Any:
        """The simulator, built on first use."""
        if self._sim is None:
            if self.simulator == "batched":
                from pacplan.worlds.uav.batched import BatchedSimulator

                self._sim = BatchedSimulator(
                    device=self.device,
                    render_chunk=self.render_chunk,
                    env_chunk=self.env_chunk,
                    compile=self.compile,
                    threads=self.threads,
                    policy_chunk=self.policy_chunk,
                    obstacles=self.obstacles,
                    radius_scale=self.radius_scale,
                )
            else:
                from pacplan.worlds.uav.bullet import BulletSimulator

                self._sim = BulletSimulator()
        return self._sim

    def rollouts(self, thetas: np.ndarray, seeds: np.ndarray) -> RolloutResult:
        """Costs, first colliding checks and primitive sequences of every (seed, policy)."""
        what = "UAV policy weights" + ("" if self.family.is_paper
                                       else f" ({self.family.label()})")
        thetas = check_policies(thetas, self.family.dim, what)
        seeds = check_seeds(seeds)
        if self.planner == "teacher":  # the privileged planner's optimal plans, flown
            from pacplan.worlds.uav.teacher import plans

            seq = np.repeat(plans(seeds)[:, None], thetas.shape[0], 1)
            return self.sim.rollout(thetas, seeds, use_net=False, forced=seq)
        return self.sim.rollout(thetas, seeds, use_net=self.use_net, net_scale=self.net_scale,
                                family=self.family)

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """(n, k) costs 1 − t_c / 12 s in [0, 1]; deterministic."""
        return self.rollouts(thetas, seeds).costs

    def replay(self, seeds: np.ndarray, sequences: np.ndarray) -> RolloutResult:
        """Fly given primitive sequences (n, k, 12) open loop; for cross-validation."""
        sequences = np.asarray(sequences, dtype=np.int64)
        dummy = np.zeros((sequences.shape[1], self.family.dim), np.float32)
        return self.sim.rollout(dummy, check_seeds(seeds), use_net=False, forced=sequences)

    def trajectory(self, theta: np.ndarray | None, seed: int) -> Trajectory:
        """The flight of one policy (None: Depth Filter only) in environment `seed`."""
        th = np.zeros((1, self.family.dim), np.float32) if theta is None else theta
        world = self if theta is not None else UAVWorld(**{**self.options(), "use_net": False})
        res = world.rollouts(th, np.array([seed]))
        seq = res.prims[0, 0]
        checks = int(res.checks[0, 0])
        scene = sample_scene(int(seed), self.obstacles, self.radius_scale)
        return trajectory_from_sequence(int(seed), seq, checks, float(res.costs[0, 0]), scene)


def trajectory_from_sequence(seed: int, seq: np.ndarray, checks: int, cost: float,
                             scene: Scene | None = None) -> Trajectory:
    """Dense positions of a flown primitive sequence (stopping at the colliding check); `scene`
    defaults to the certified world's scene of `seed`."""
    seq = np.asarray(seq)
    seq = seq[seq >= 0].astype(np.int64)
    decisions, points = dyn.flight(seq, checks)
    scene = sample_scene(seed) if scene is None else scene
    return Trajectory(seed, scene, points, decisions, seq, checks, cost)
