"""The quadruped's episode dynamics, written once: initial state, observation, transition, end
rule, reward and cost (in the manner of Gymnasium's functional `FuncEnv`).

`QuadrupedWorld` (through `rollout`) and the Gymnasium environment `MinitaurTerrainEnv` are thin
adapters over these functions, so a certified cost and a Gym episode cannot drift apart. PyBullet
is stateful: the simulator is the engine that holds the physics, and everything else an episode
needs to remember lives in a small immutable `EpisodeState` that each function takes and
`transition` returns anew.

An episode walks the terrain one 0.5 s gait primitive at a time. It terminates at the finish line
(Δx = 6 m ahead of where the clock started) or on a fall, and is truncated after the horizon
(10 s = 20 primitives). Its cost is clip(1 − Δx / x̃, 0, 1), Δx the torso's forward displacement:
0 at the finish line, 1 for no progress (or walking backwards). A step's reward is its progress
divided by x̃, so an episode's return is 1 − cost before clipping.

A sensor fault ends an episode too: an observation (depth image or proprioception) that is not
finite, which PyBullet's TinyRenderer produces now and then (NaN depth pixels on a finite
state). The policy never sees it; the episode terminates before the next primitive with cost 1,
the worst cost, so a certificate holds whatever the reading should have been.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.sim import PrimitiveOutcome
from pacplan.worlds.quadruped.simulator import QuadrupedSim
from pacplan.worlds.quadruped.terrain import Terrain

SENSOR_FAULT_COST = 1.0  # the worst cost: an unreadable observation certifies nothing better


@dataclass(frozen=True)
class RolloutConfig:
    """Episode length and goal (the design's numbers)."""

    finish_dx: float = 6.0
    horizon_s: float = 10.0
    primitive_s: float = 0.5

    @property
    def max_primitives(self) -> int:
        """Primitives in the horizon; an episode still running after them is truncated."""
        return round(self.horizon_s / self.primitive_s)


@dataclass(frozen=True)
class EpisodeState:
    """What an episode remembers between primitives (the simulator holds the physics).

    `x0` is the torso's x when the clock started, `x` its x after the last primitive.
    """

    x0: float
    x: float
    primitives: int = 0
    fell: bool = False
    finished: bool = False
    sensor_fault: bool = False


def initial(sim: QuadrupedSim, terrain: Terrain) -> EpisodeState:
    """Rebuild the simulation on `terrain`, let the robot settle and start the clock there."""
    sim.reset(terrain)
    x0 = sim.torso_x()
    return EpisodeState(x0=x0, x=x0)


def observation(sim: QuadrupedSim, depth: bool = True) -> dict[str, np.ndarray]:
    """{"depth": (50, 50) float32 metres, "proprio": (22,) float32}: what the policy sees.

    `depth=False` skips rendering (for controllers that ignore the image) and reads far
    everywhere instead.
    """
    cam = sim.camera
    image = (
        sim.depth_image() if depth
        else np.full((cam.size, cam.size), cam.far_m, dtype=np.float32)
    )
    return {"depth": image, "proprio": sim.proprioception().astype(np.float32)}


def sensor_fault(obs: dict[str, np.ndarray]) -> bool:
    """The observation holds a value that is not finite: the episode ends with cost 1."""
    return not all(bool(np.isfinite(obs[key]).all()) for key in ("depth", "proprio"))


def faulted(state: EpisodeState) -> EpisodeState:
    """`state` ended by a sensor fault (terminated, cost 1)."""
    return replace(state, sensor_fault=True)


def transition(
    sim: QuadrupedSim,
    state: EpisodeState,
    gait: GaitParams,
    config: RolloutConfig,
    record_path: bool = False,
) -> tuple[EpisodeState, PrimitiveOutcome]:
    """Run one gait primitive from `state`; the next state and what happened on the way."""
    outcome = sim.run_primitive(
        gait, config.primitive_s, finish_x=state.x0 + config.finish_dx, record_path=record_path
    )
    after = replace(
        state,
        x=sim.torso_x(),
        primitives=state.primitives + 1,
        fell=outcome.fell,
        finished=outcome.finished,
    )
    return after, outcome


def terminated(state: EpisodeState) -> bool:
    """The episode has reached an end state: a fall, the finish line or a sensor fault."""
    return state.fell or state.finished or state.sensor_fault


def truncated(state: EpisodeState, config: RolloutConfig) -> bool:
    """The episode is cut off by the horizon without having ended on its own."""
    return not terminated(state) and state.primitives >= config.max_primitives


def done(state: EpisodeState, config: RolloutConfig) -> bool:
    """No further primitive is run: terminated or truncated."""
    return terminated(state) or truncated(state, config)


def reward(state: EpisodeState, next_state: EpisodeState, config: RolloutConfig) -> float:
    """Forward progress of one transition as a fraction of the goal distance; a transition
    that ends in a sensor fault takes back the progress before it, so the return stays
    1 − cost (0)."""
    if state.sensor_fault:  # already ended
        return 0.0
    if next_state.sensor_fault:
        return float((state.x0 - state.x) / config.finish_dx)
    return float((next_state.x - state.x) / config.finish_dx)


def cost(state: EpisodeState, config: RolloutConfig) -> float:
    """The certified cost of the episode so far, clip(1 − Δx / x̃, 0, 1); 1 after a sensor
    fault."""
    if state.sensor_fault:
        return SENSOR_FAULT_COST
    return cost_from_displacement(state.x - state.x0, config.finish_dx)


def cost_from_displacement(dx: float, finish_dx: float) -> float:
    """clip(1 − Δx / x̃, 0, 1)."""
    return float(np.clip(1.0 - dx / finish_dx, 0.0, 1.0))
