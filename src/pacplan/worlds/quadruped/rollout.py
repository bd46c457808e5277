"""One quadruped rollout: observe, pick a gait with the policy, walk 0.5 s, repeat.

The rollout ends at the finish line, on a fall, or after the horizon (10 s simulated). Its cost is
clip(1 − Δx / x̃, 0, 1), Δx the torso's forward displacement from where the rollout clock started:
0 at the finish line, 1 for no progress (or walking backwards).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import policy_output
from pacplan.worlds.quadruped.sim import MinitaurSim
from pacplan.worlds.quadruped.terrain import Terrain

# A controller maps (depth image, 22 proprioceptive values) to gait parameters.
Controller = Callable[[np.ndarray, np.ndarray], GaitParams]


@dataclass(frozen=True)
class RolloutConfig:
    """Rollout length and goal (the design's numbers)."""

    finish_dx: float = 6.0
    horizon_s: float = 10.0
    primitive_s: float = 0.5


@dataclass
class RolloutResult:
    """Outcome of one rollout; `path` rows are (t, x, y, z) of the torso every 0.01 s."""

    cost: float
    dx: float
    sim_time: float
    fell: bool
    finished: bool
    primitives: int
    gaits: list[GaitParams] = field(default_factory=list)
    path: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))
    first_depth: np.ndarray | None = None


def policy_controller(theta: np.ndarray) -> Controller:
    """Controller of the 944-weight network with weights `theta`.

    Observations and η pass through float32, as they do through the Gymnasium environment, so
    an episode driven by the same network there reproduces this rollout exactly.
    """

    def control(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
        obs = np.asarray(proprio, dtype=np.float32)
        eta = policy_output(theta, np.asarray(depth, dtype=np.float32), obs).astype(np.float32)
        return GaitParams.from_policy_output(eta)

    return control


def fixed_gait_controller(params: GaitParams) -> Controller:
    """Controller that ignores its observations and always runs the same gait."""

    def control(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
        return params

    return control


def cost_from_displacement(dx: float, finish_dx: float) -> float:
    """clip(1 − Δx / x̃, 0, 1)."""
    return float(np.clip(1.0 - dx / finish_dx, 0.0, 1.0))


def rollout(
    sim: MinitaurSim,
    terrain: Terrain,
    controller: Controller,
    config: RolloutConfig | None = None,
    record: bool = False,
    needs_depth: bool = True,
) -> RolloutResult:
    """Run one rollout on `terrain`; `needs_depth=False` skips rendering for blind controllers."""
    cfg = config or RolloutConfig()
    sim.reset(terrain)
    x0 = float(sim.torso_pose()[0][0])
    finish_x = x0 + cfg.finish_dx
    n_primitives = round(cfg.horizon_s / cfg.primitive_s)
    fell = finished = False
    gaits: list[GaitParams] = []
    path: list[tuple[float, float, float, float]] = []
    first_depth = None
    if record:
        pos = sim.torso_pose()[0]
        path.append((0.0, float(pos[0]), float(pos[1]), float(pos[2])))
    blank = np.full((sim.camera.size, sim.camera.size), sim.camera.far_m, dtype=np.float32)
    for _ in range(n_primitives):
        depth = sim.depth_image() if needs_depth or record else blank
        if first_depth is None and record:
            first_depth = depth
        params = controller(depth, sim.proprioception())
        gaits.append(params)
        outcome = sim.run_primitive(params, cfg.primitive_s, finish_x=finish_x, record_path=record)
        path.extend(outcome.path)
        if outcome.fell or outcome.finished:
            fell, finished = outcome.fell, outcome.finished
            break
    dx = float(sim.torso_pose()[0][0]) - x0
    return RolloutResult(
        cost=cost_from_displacement(dx, cfg.finish_dx),
        dx=dx,
        sim_time=sim.time,
        fell=fell,
        finished=finished,
        primitives=len(gaits),
        gaits=gaits,
        path=np.array(path, dtype=np.float64).reshape(-1, 4),
        first_depth=first_depth,
    )
