"""`QuadrupedWorld`: the Minitaur-on-rough-terrain world behind the `World` interface."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.validation import check_policies, check_seeds, check_unit_costs
from pacplan.worlds.quadruped.camera import CameraConfig
from pacplan.worlds.quadruped.episode import RolloutConfig
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import RolloutResult, policy_controller, rollout
from pacplan.worlds.quadruped.scene import DEFAULT_ROBOT, robot_spec
from pacplan.worlds.quadruped.sim import MinitaurSim, PhysicsConfig
from pacplan.worlds.quadruped.simulator import QuadrupedSim
from pacplan.worlds.quadruped.terrain import Terrain, sample_terrain

ENGINES = ("bullet", "mujoco")


class QuadrupedWorld:
    """Environments are terrains named by seeds; a policy is 944 weights; cost ∈ [0, 1].

    Options (all keyword, from a config): `robot` ("derpy", the default: the Minitaur Derpy the
    paper's code drove, no self-collision, fall at torso up · world up < 0.3; "minitaur":
    pybullet_envs' default Minitaur that pacplan simulated before, kept for comparison — see
    `pacplan.worlds.quadruped.scene`), `max_slope_deg` (23.3; the paper's text says 35),
    `plank_length` (0.5 m), `finish_dx` (6 m), `horizon_s` (10 s), `primitive_s` (0.5 s),
    `time_step` (0.002 s) and `solver_iterations` (60) (the public code's physics; a larger step
    or fewer iterations is coarser than it), `camera_pitch_deg` (2.86°), `depth_far_m` (10 m).
    The `minitaur` robot alone also takes `self_collision` (True) and `mounted_contacts` (True:
    pybullet_envs' contact model, in which the motor hubs rub on the chassis; False: the clean
    model, Bullet only).
    `physics`: "bullet" (PyBullet, the default) or "mujoco" (the same robot, terrain, gait,
    camera and cost in MuJoCo, several times cheaper; its contact model is calibrated against
    Bullet in distribution over terrains, not rollout by rollout — see
    `pacplan.worlds.quadruped.mjcf`; `solver_iterations` is Bullet's and not used there).
    `threads` (1, MuJoCo only): simulators run in that many threads inside `costs` (MuJoCo
    steps without the GIL); results do not depend on it. The constructor only validates; the
    simulator is opened on the first rollout, so worlds are cheap to rebuild in workers.
    """

    name = "quadruped"

    def __init__(
        self,
        max_slope_deg: float = 23.3,
        plank_length: float = 0.5,
        finish_dx: float = 6.0,
        horizon_s: float = 10.0,
        primitive_s: float = 0.5,
        time_step: float = 0.002,
        solver_iterations: int = 60,
        self_collision: bool | None = None,
        mounted_contacts: bool | None = None,
        camera_pitch_deg: float | None = None,
        depth_far_m: float = 10.0,
        physics: str = "bullet",
        threads: int = 1,
        robot: str = DEFAULT_ROBOT,
    ) -> None:
        spec = robot_spec(robot)  # refuses an unknown robot naming the allowed values
        spec.urdf_path()  # refuses a missing URDF naming the file
        if spec.name != "minitaur":
            for option, value in (("self_collision", self_collision),
                                  ("mounted_contacts", mounted_contacts)):
                if value is not None:
                    raise PacplanError(f"{option} is an option of robot 'minitaur' only; robot "
                                       f"{spec.name!r} is loaded as the paper's code loads it")
        self_collision = True if self_collision is None else self_collision
        mounted_contacts = True if mounted_contacts is None else mounted_contacts
        if physics not in ENGINES:
            raise PacplanError(f"physics must be one of {', '.join(ENGINES)}, got {physics!r}")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise PacplanError(f"threads must be a whole number >= 1, got {threads!r}")
        if threads > 1 and physics == "bullet":
            raise PacplanError("threads > 1 needs physics='mujoco': PyBullet holds the GIL, so "
                               "Bullet rollouts parallelise over worker processes instead")
        if physics == "mujoco" and not mounted_contacts:
            raise PacplanError("mounted_contacts=False is a Bullet option (physics: bullet): the "
                               "MuJoCo model always drops parent-child contacts")
        if finish_dx <= 0 or horizon_s <= 0 or primitive_s <= 0:
            raise PacplanError("finish_dx, horizon_s and primitive_s must be positive")
        if time_step <= 0 or abs(primitive_s / time_step - round(primitive_s / time_step)) > 1e-6:
            raise PacplanError("primitive_s must be a whole number of physics time steps")
        if abs(horizon_s / primitive_s - round(horizon_s / primitive_s)) > 1e-6:
            raise PacplanError("horizon_s must be a whole number of primitives")
        self.max_slope_deg = float(max_slope_deg)
        self.plank_length = float(plank_length)
        self.terrain(0)  # validates max_slope_deg and plank_length
        if physics == "mujoco" and self.max_slope_deg >= 45.0:
            raise PacplanError("physics='mujoco' represents ridges with slopes below 45° only, "
                               f"got max_slope_deg={self.max_slope_deg:g}")
        self.engine = physics
        self.threads = threads
        self.rollout_config = RolloutConfig(
            finish_dx=float(finish_dx), horizon_s=float(horizon_s), primitive_s=float(primitive_s)
        )
        self.robot = spec.name
        self.physics = PhysicsConfig(
            robot=spec.name,
            time_step=float(time_step),
            solver_iterations=int(solver_iterations),
            self_collision=bool(self_collision),
            mounted_contacts=bool(mounted_contacts),
        )
        camera = CameraConfig(far_m=float(depth_far_m))
        if camera_pitch_deg is not None:
            camera = CameraConfig(pitch_deg=float(camera_pitch_deg), far_m=float(depth_far_m))
        self.camera = camera
        self._sim: QuadrupedSim | None = None
        self._thread_sims: list[QuadrupedSim] = []  # simulators of threads 2, 3, ...

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_sim"] = None  # a simulator does not travel between processes
        state["_thread_sims"] = []
        return state

    def _new_sim(self) -> QuadrupedSim:
        if self.engine == "mujoco":
            from pacplan.worlds.quadruped.mujoco_sim import MujocoMinitaurSim

            return MujocoMinitaurSim(self.physics, self.camera)
        return MinitaurSim(self.physics, self.camera)

    def _sim_pool(self, n: int) -> list[QuadrupedSim]:
        """`n` simulators, one per thread (the first is `sim`)."""
        while len(self._thread_sims) < n - 1:
            self._thread_sims.append(self._new_sim())
        return [self.sim, *self._thread_sims[: n - 1]]

    @property
    def sim(self) -> QuadrupedSim:
        """The simulator of the chosen engine (opened on first use)."""
        if self._sim is None:
            self._sim = self._new_sim()
        return self._sim

    def close(self) -> None:
        """Close the simulators, if any were opened (a later rollout reopens them)."""
        for sim in [self._sim, *self._thread_sims]:
            if sim is not None:
                sim.close()

    def policy_dim(self) -> int:
        return POLICY_DIM

    def terrain(self, seed: int) -> Terrain:
        """The terrain environment seed `seed` names under this world's options."""
        return sample_terrain(int(seed), self.max_slope_deg, self.plank_length)

    def rollout(self, theta: np.ndarray, seed: int, record: bool = False,
                sim: QuadrupedSim | None = None) -> RolloutResult:
        """One rollout of policy `theta` on the terrain of `seed`, with its details."""
        return rollout(
            sim or self.sim, self.terrain(seed), policy_controller(theta), self.rollout_config,
            record=record,
        )

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """(n, k) costs of k policies on n terrains, each a full rollout; with `threads` > 1
        the rollouts are shared out among that many simulators in threads (each rollout
        starts from a reset, so the result is the same for any thread count)."""
        th = check_policies(thetas, POLICY_DIM, "quadruped policy weights")
        sd = check_seeds(seeds, "quadruped terrain seeds")
        out = np.empty((sd.size, th.shape[0]), dtype=np.float64)
        jobs = [(i, j) for i in range(sd.size) for j in range(th.shape[0])]
        n_threads = min(self.threads, len(jobs))

        def run(sim: QuadrupedSim, part: list[tuple[int, int]]) -> None:
            for i, j in part:
                out[i, j] = self.rollout(th[j], int(sd[i]), sim=sim).cost

        if n_threads == 1:
            run(self.sim, jobs)
        elif n_threads > 1:  # (no jobs: no simulator is opened)
            sims = self._sim_pool(n_threads)
            with ThreadPoolExecutor(n_threads) as pool:
                futures = [pool.submit(run, sims[t], jobs[t::n_threads])
                           for t in range(n_threads)]
                for future in futures:
                    future.result()
        if out.size == 0:
            return out
        # Costs are clipped by construction; this catches a simulation that went NaN.
        return check_unit_costs(out, "quadruped costs")[0]
