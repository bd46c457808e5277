"""`QuadrupedWorld`: the Minitaur-on-rough-terrain world behind the `World` interface."""

from __future__ import annotations

from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.validation import check_policies, check_seeds, check_unit_costs
from pacplan.worlds.quadruped.camera import CameraConfig
from pacplan.worlds.quadruped.episode import RolloutConfig
from pacplan.worlds.quadruped.policy import POLICY_DIM
from pacplan.worlds.quadruped.rollout import RolloutResult, policy_controller, rollout
from pacplan.worlds.quadruped.sim import MinitaurSim, PhysicsConfig
from pacplan.worlds.quadruped.terrain import Terrain, sample_terrain


class QuadrupedWorld:
    """Environments are terrains named by seeds; a policy is 944 weights; cost ∈ [0, 1].

    Options (all keyword, from a config): `max_slope_deg` (23.3; the paper's text says 35),
    `plank_length` (0.5 m), `finish_dx` (6 m), `horizon_s` (10 s), `primitive_s` (0.5 s),
    `time_step` (0.002 s) and `solver_iterations` (60) (the public code's physics; a larger step
    or fewer iterations is coarser than it), `self_collision` (True),
    `mounted_contacts` (True: the public code's contact model, in which the motor hubs rub on
    the chassis they are mounted on; False: the clean model, about 1.6x faster, in which the
    open-loop gait walks much better — see `pacplan.worlds.quadruped.scene`),
    `camera_pitch_deg` (2.86°), `depth_far_m` (10 m). The constructor only validates; the
    PyBullet client is opened on the first rollout, so worlds are cheap to rebuild in workers.
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
        self_collision: bool = True,
        mounted_contacts: bool = True,
        camera_pitch_deg: float | None = None,
        depth_far_m: float = 10.0,
    ) -> None:
        if finish_dx <= 0 or horizon_s <= 0 or primitive_s <= 0:
            raise PacplanError("finish_dx, horizon_s and primitive_s must be positive")
        if time_step <= 0 or abs(primitive_s / time_step - round(primitive_s / time_step)) > 1e-6:
            raise PacplanError("primitive_s must be a whole number of physics time steps")
        if abs(horizon_s / primitive_s - round(horizon_s / primitive_s)) > 1e-6:
            raise PacplanError("horizon_s must be a whole number of primitives")
        self.max_slope_deg = float(max_slope_deg)
        self.plank_length = float(plank_length)
        self.terrain(0)  # validates max_slope_deg and plank_length
        self.rollout_config = RolloutConfig(
            finish_dx=float(finish_dx), horizon_s=float(horizon_s), primitive_s=float(primitive_s)
        )
        self.physics = PhysicsConfig(
            time_step=float(time_step),
            solver_iterations=int(solver_iterations),
            self_collision=bool(self_collision),
            mounted_contacts=bool(mounted_contacts),
        )
        camera = CameraConfig(far_m=float(depth_far_m))
        if camera_pitch_deg is not None:
            camera = CameraConfig(pitch_deg=float(camera_pitch_deg), far_m=float(depth_far_m))
        self.camera = camera
        self._sim: MinitaurSim | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_sim"] = None  # a PyBullet connection does not travel between processes
        return state

    @property
    def sim(self) -> MinitaurSim:
        if self._sim is None:
            self._sim = MinitaurSim(self.physics, self.camera)
        return self._sim

    def close(self) -> None:
        """Disconnect the simulator, if one was opened (a later rollout reopens it)."""
        if self._sim is not None:
            self._sim.close()

    def policy_dim(self) -> int:
        return POLICY_DIM

    def terrain(self, seed: int) -> Terrain:
        """The terrain environment seed `seed` names under this world's options."""
        return sample_terrain(int(seed), self.max_slope_deg, self.plank_length)

    def rollout(self, theta: np.ndarray, seed: int, record: bool = False) -> RolloutResult:
        """One rollout of policy `theta` on the terrain of `seed`, with its details."""
        return rollout(
            self.sim, self.terrain(seed), policy_controller(theta), self.rollout_config,
            record=record,
        )

    def costs(self, thetas: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        """(n, k) costs of k policies on n terrains, each a full PyBullet rollout."""
        th = check_policies(thetas, POLICY_DIM, "quadruped policy weights")
        sd = check_seeds(seeds, "quadruped terrain seeds")
        out = np.empty((sd.size, th.shape[0]), dtype=np.float64)
        for i, seed in enumerate(sd):
            for j in range(th.shape[0]):
                out[i, j] = self.rollout(th[j], int(seed)).cost
        if out.size == 0:
            return out
        # Costs are clipped by construction; this catches a simulation that went NaN.
        return check_unit_costs(out, "quadruped costs")[0]
