"""One quadruped rollout: the shared episode step (`episode`) driven by a controller to the end.

A controller sees each observation, picks a gait and the episode runs it for one primitive; the
rollout keeps what `QuadrupedWorld` and the renderer want to know about the episode afterwards.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from pacplan.worlds.quadruped import episode
from pacplan.worlds.quadruped.episode import RolloutConfig
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import policy_action
from pacplan.worlds.quadruped.simulator import QuadrupedSim
from pacplan.worlds.quadruped.terrain import Terrain

# A controller maps (depth image, 22 proprioceptive values) to gait parameters.
Controller = Callable[[np.ndarray, np.ndarray], GaitParams]


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
    sensor_fault: bool = False  # ended by an observation that was not finite (cost 1)


def policy_controller(theta: np.ndarray) -> Controller:
    """Controller of the 944-weight network with weights `theta`.

    It maps η to a gait exactly as `MinitaurTerrainEnv.step` maps an action, so an episode there
    driven by `policy_action` reproduces this rollout bit for bit.
    """

    def control(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
        return GaitParams.from_policy_output(policy_action(theta, depth, proprio))

    return control


def fixed_gait_controller(params: GaitParams) -> Controller:
    """Controller that ignores its observations and always runs the same gait."""

    def control(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
        return params

    return control


def rollout(
    sim: QuadrupedSim,
    terrain: Terrain,
    controller: Controller,
    config: RolloutConfig | None = None,
    record: bool = False,
    needs_depth: bool = True,
) -> RolloutResult:
    """Run one episode on `terrain`; `needs_depth=False` skips rendering for blind controllers.

    `record` keeps the torso path and the first depth image (for figures). An observation that
    is not finite ends the episode with cost 1 (`episode.sensor_fault`).
    """
    cfg = config or RolloutConfig()
    state = episode.initial(sim, terrain)
    gaits: list[GaitParams] = []
    path: list[tuple[float, float, float, float]] = []
    first_depth = None
    if record:
        pos = sim.torso_pose()[0]
        path.append((0.0, float(pos[0]), float(pos[1]), float(pos[2])))
    while not episode.done(state, cfg):
        obs = episode.observation(sim, depth=needs_depth or record)
        if episode.sensor_fault(obs):
            state = episode.faulted(state)
            break
        if first_depth is None and record:
            first_depth = obs["depth"]
        gaits.append(controller(obs["depth"], obs["proprio"]))
        state, outcome = episode.transition(sim, state, gaits[-1], cfg, record_path=record)
        path.extend(outcome.path)
    return RolloutResult(
        cost=episode.cost(state, cfg),
        dx=state.x - state.x0,
        sim_time=sim.time,
        fell=state.fell,
        finished=state.finished,
        primitives=state.primitives,
        gaits=gaits,
        path=np.array(path, dtype=np.float64).reshape(-1, 4),
        first_depth=first_depth,
        sensor_fault=state.sensor_fault,
    )
