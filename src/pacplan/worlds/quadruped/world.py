"""`QuadrupedWorld`: the Minitaur-on-rough-terrain world behind the `World` interface."""

from __future__ import annotations

import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pacplan.errors import PacplanError, SensorFaultWarning
from pacplan.validation import check_policies, check_seeds, check_unit_costs
from pacplan.worlds.quadruped.boxes import PAPER_MAX_SLOPE_DEG, BoxTerrain, sample_box_terrain
from pacplan.worlds.quadruped.boxes import first_slopes_deg as first_box_slopes
from pacplan.worlds.quadruped.camera import CameraConfig
from pacplan.worlds.quadruped.episode import RolloutConfig
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import (
    Controller,
    RolloutResult,
    policy_controller,
    rollout,
)
from pacplan.worlds.quadruped.scene import DEFAULT_ROBOT, robot_spec
from pacplan.worlds.quadruped.sim import MinitaurSim, PhysicsConfig
from pacplan.worlds.quadruped.simulator import QuadrupedSim
from pacplan.worlds.quadruped.terrain import Terrain, sample_terrain
from pacplan.worlds.quadruped.terrain import first_slopes_deg as first_ridge_slopes

ENGINES = ("bullet", "mujoco")
STEEP_FIRST_SLOPE_DEG = 20.0  # stratum `steep`: where the MuJoCo-trained prior stalls
VARIANTS = ("text", "paper-code")  # the paper's text (default); the paper's code as it ran
ACTION_REPEAT = 5  # variant 'paper-code': physics steps per control step
PLANNERS = ("policy", "teacher")  # who walks: θ, or the privileged teacher (a baseline row)


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

    `variant`: "text" (the default: the paper's text, DESIGN.md §5) or "paper-code": the
    experiment as the paper's public code ran it (`pacplan.worlds.quadruped.paper_code` lists
    every difference: its box terrain, 0.25 s primitives with the gait clock at `gait_clock` = 2
    times simulated time, 5 s rollouts, far plane 1000 m, its settling and cost rule, clipped).
    There the defaults become primitive_s 0.25, horizon_s 5, depth_far_m 1000, gait_clock 2,
    max_slope_deg 35·2/3 and physics "mujoco" ("bullet" runs it in PyBullet, the paper's
    engine); `plank_length`, `robot: minitaur` and the Minitaur's contact options are refused in
    one line, as is `gait_clock` in the text world. Options left unset take the variant's
    defaults, so the text world is built exactly as before.

    `planner`: "policy" (the default) walks θ; "teacher" walks the privileged look-ahead teacher
    (`pacplan.worlds.quadruped.teacher`: it sees the terrain and the simulator's state) and
    ignores θ, so a run can carry it as a baseline row, the floor a student is taught towards.
    It needs physics "mujoco", the Derpy and the text world (refused in one line otherwise).
    """

    name = "quadruped"

    @classmethod
    def check_options(cls, **options: Any) -> None:
        """Refuse what building this world would refuse (`planner: teacher` on PyBullet,
        `threads` > 1 on Bullet) when a run starts: building makes no simulator, and a
        baseline's world is otherwise first built after the cost matrices."""
        cls(**options)

    def __init__(
        self,
        max_slope_deg: float | None = None,
        plank_length: float | None = None,
        finish_dx: float = 6.0,
        horizon_s: float | None = None,
        primitive_s: float | None = None,
        time_step: float = 0.002,
        solver_iterations: int = 60,
        self_collision: bool | None = None,
        mounted_contacts: bool | None = None,
        camera_pitch_deg: float | None = None,
        depth_far_m: float | None = None,
        physics: str | None = None,
        threads: int = 1,
        robot: str = DEFAULT_ROBOT,
        variant: str = "text",
        gait_clock: float | None = None,
        planner: str = "policy",
    ) -> None:
        if planner not in PLANNERS:
            raise PacplanError(f"planner must be one of {', '.join(PLANNERS)}, got {planner!r}")
        if variant not in VARIANTS:
            raise PacplanError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
        self.variant = variant
        if variant == "paper-code":
            refused = {"plank_length": plank_length, "self_collision": self_collision,
                       "mounted_contacts": mounted_contacts}
            for option, value in refused.items():
                if value is not None:
                    raise PacplanError(f"{option} is not an option of variant 'paper-code' (its "
                                       "terrain is the paper's boxes, its robot the Derpy)")
            if robot != DEFAULT_ROBOT:
                raise PacplanError(f"variant 'paper-code' runs the paper's robot only (robot: "
                                   f"derpy), got robot {robot!r}")
            gait_clock = 2.0 if gait_clock is None else gait_clock
            if isinstance(gait_clock, bool) or not 0.0 < float(gait_clock) <= 10.0:
                raise PacplanError(f"gait_clock must lie in (0, 10], got {gait_clock!r}")
            if max_slope_deg is None:
                max_slope_deg = PAPER_MAX_SLOPE_DEG
            horizon_s = 5.0 if horizon_s is None else horizon_s
            primitive_s = 0.25 if primitive_s is None else primitive_s
            depth_far_m = 1000.0 if depth_far_m is None else depth_far_m
            physics = "mujoco" if physics is None else physics
        elif gait_clock is not None:
            raise PacplanError("gait_clock is an option of variant 'paper-code' only: the text "
                               "world's gait phase is ω × simulated time")
        max_slope_deg = 23.3 if max_slope_deg is None else max_slope_deg
        plank_length = 0.5 if plank_length is None else plank_length
        horizon_s = 10.0 if horizon_s is None else horizon_s
        primitive_s = 0.5 if primitive_s is None else primitive_s
        depth_far_m = 10.0 if depth_far_m is None else depth_far_m
        physics = "bullet" if physics is None else physics
        self.gait_clock = gait_clock
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
        if variant == "paper-code":
            control = primitive_s / (ACTION_REPEAT * time_step)
            if abs(control - round(control)) > 1e-6:
                raise PacplanError(f"variant 'paper-code': primitive_s must be a whole number of "
                                   f"control steps ({ACTION_REPEAT} physics steps each), got "
                                   f"{primitive_s!r}")
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
        self.planner = planner
        if planner == "teacher":
            from pacplan.worlds.quadruped.teacher import check_teacher_world

            check_teacher_world(self.name, {"physics": physics, "robot": self.robot,
                                            "variant": variant})
        self._sim: QuadrupedSim | None = None
        self._thread_sims: list[QuadrupedSim] = []  # simulators of threads 2, 3, ...

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_sim"] = None  # a simulator does not travel between processes
        state["_thread_sims"] = []
        return state

    def _new_sim(self) -> QuadrupedSim:
        if self.variant == "paper-code":
            from pacplan.worlds.quadruped.paper_code import PaperCodeConfig

            clock = PaperCodeConfig(gait_clock=float(self.gait_clock or 2.0))
            if self.engine == "bullet":
                from pacplan.worlds.quadruped.paper_code_bullet import PaperCodeBulletSim

                return PaperCodeBulletSim(self.physics, self.camera, clock)
            from pacplan.worlds.quadruped.paper_code_mujoco import PaperCodeMujocoSim

            return PaperCodeMujocoSim(self.physics, self.camera, clock)
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

    def terrain(self, seed: int) -> Terrain | BoxTerrain:
        """The terrain environment seed `seed` names under this world's options."""
        if self.variant == "paper-code":
            return sample_box_terrain(int(seed), self.max_slope_deg)
        return sample_terrain(int(seed), self.max_slope_deg, self.plank_length)

    def strata(self) -> dict[str, str]:
        """The strata this world names (`pacplan.worlds.base.StratifiedWorld`)."""
        return {"steep": f"the first tent (ridge) rises at {STEEP_FIRST_SLOPE_DEG:g}° or more"}

    def in_stratum(self, name: str, seeds: np.ndarray) -> np.ndarray:
        """Membership of `seeds` in stratum `name` (`steep`), from each terrain's first slope
        (no simulator)."""
        if name != "steep":
            raise PacplanError(f"unknown stratum {name!r} of world 'quadruped'; its strata: "
                               "steep")
        return self.first_slopes_deg(seeds) >= STEEP_FIRST_SLOPE_DEG

    def first_slopes_deg(self, seeds: np.ndarray) -> np.ndarray:
        """The first tent's (ridge's) slope in degrees of each seed's terrain."""
        if self.variant == "paper-code":
            return first_box_slopes(seeds, self.max_slope_deg)
        return first_ridge_slopes(seeds, self.max_slope_deg, self.plank_length)

    def rollout(self, theta: np.ndarray, seed: int, record: bool = False,
                sim: QuadrupedSim | None = None) -> RolloutResult:
        """One rollout of policy `theta` on the terrain of `seed`, with its details (with
        `planner: teacher`, the teacher's episode on this world's simulator; θ is ignored)."""
        if self.planner == "teacher":
            from pacplan.worlds.quadruped.teacher import QuadrupedTeacher

            return QuadrupedTeacher(self).walk(int(seed), record=record)
        return self.run(policy_controller(theta), seed, record=record, sim=sim)

    def run(self, controller: Controller, seed: int, record: bool = False,
            sim: QuadrupedSim | None = None) -> RolloutResult:
        """One rollout of any controller on the terrain of `seed`, under this world's episode
        and cost rule (the paper code's for variant 'paper-code')."""
        if self.variant == "paper-code":
            from pacplan.worlds.quadruped.paper_code import paper_code_rollout

            result = paper_code_rollout(sim or self.sim, self.terrain(seed),  # type: ignore[arg-type]
                                        controller, self.rollout_config, record=record)
        else:
            result = rollout(sim or self.sim, self.terrain(seed), controller,
                             self.rollout_config, record=record)
        if result.sensor_fault:
            warnings.warn(f"quadruped terrain {int(seed)}: an observation was not finite after "
                          f"{result.primitives} primitives; the rollout ended with cost 1",
                          SensorFaultWarning, stacklevel=2)
        return result

    def _walk_policies(self, th: np.ndarray, sd: np.ndarray, out: np.ndarray) -> None:
        """Fill `out[i, j]` with policy j's cost on terrain sd[i], in `threads` simulators."""
        jobs = [(i, j) for i in range(sd.size) for j in range(th.shape[0])]
        n_threads = min(self.threads, len(jobs))

        def run(sim: QuadrupedSim, part: list[tuple[int, int]]) -> None:
            for i, j in part:
                out[i, j] = self.rollout(th[j], int(sd[i]), sim=sim).cost

        if n_threads == 1:
            run(self.sim, jobs)
            return
        sims = self._sim_pool(n_threads)
        with ThreadPoolExecutor(n_threads) as pool:
            futures = [pool.submit(run, sims[t], jobs[t::n_threads]) for t in range(n_threads)]
            for future in futures:
                future.result()

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """(n, k) costs of k policies on n terrains, each a full rollout; with `threads` > 1
        the rollouts are shared out among that many simulators in threads (each rollout
        starts from a reset, so the result is the same for any thread count)."""
        th = check_policies(thetas, POLICY_DIM, "quadruped policy weights")
        sd = check_seeds(seeds, "quadruped terrain seeds")
        out = np.empty((sd.size, th.shape[0]), dtype=np.float64)
        if out.size == 0:
            return out  # no simulator is opened
        if self.planner == "teacher":  # θ is not used: one teacher episode per terrain
            from pacplan.worlds.quadruped.teacher import QuadrupedTeacher

            out[:] = QuadrupedTeacher(self).costs(sd)[:, None]
        else:
            self._walk_policies(th, sd, out)
        # Costs are clipped by construction; this catches a simulation that went NaN.
        return check_unit_costs(out, "quadruped costs")[0]
