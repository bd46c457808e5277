"""Gymnasium environment `pacplan/MinitaurTerrain-v0`: one step = one 0.5 s gait primitive.

A thin adapter over the shared episode step (`pacplan.worlds.quadruped.episode`), the same one
`QuadrupedWorld` certifies with. Observation: {"depth": (50, 50) float32 metres, "proprio": (22,)
float32}. Action: η ∈ [0, 1]^4, the policy's sigmoid outputs, mapped to the sine gait exactly as
the certified policies map them. Reward: forward progress of the step divided by the 6 m goal, so
an episode's return is 1 − cost before clipping. The episode terminates on a fall or at the finish
line and is truncated after 20 primitives (10 s simulated). `reset(options={"terrain_seed": s})`
walks the terrain of environment seed s, the same terrain `QuadrupedWorld` uses for that seed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from pacplan.worlds.quadruped import episode
from pacplan.worlds.quadruped.episode import EpisodeState
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import IMAGE_SIZE, N_PROPRIO
from pacplan.worlds.quadruped.world import QuadrupedWorld

_MAX_TERRAIN_SEED = 2**31 - 1


class MinitaurTerrainEnv(gym.Env):
    """The quadruped world as a Gymnasium environment (keyword options as `QuadrupedWorld`)."""

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 - gymnasium convention

    def __init__(self, **world_options: Any) -> None:
        self.world = QuadrupedWorld(**world_options)
        far = self.world.camera.far_m
        self.observation_space = spaces.Dict(
            {
                "depth": spaces.Box(0.0, far, (IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32),
                "proprio": spaces.Box(-np.inf, np.inf, (N_PROPRIO,), dtype=np.float32),
            }
        )
        self.action_space = spaces.Box(0.0, 1.0, (4,), dtype=np.float32)
        self.terrain_seed = -1
        self._state: EpisodeState | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if options and "terrain_seed" in options:
            self.terrain_seed = int(options["terrain_seed"])
        else:
            self.terrain_seed = int(self.np_random.integers(0, _MAX_TERRAIN_SEED))
        sim = self.world.sim
        self._state = episode.initial(sim, self.world.terrain(self.terrain_seed))
        info = {"terrain_seed": self.terrain_seed, "sim_time": sim.time}
        return episode.observation(sim), info

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        cfg = self.world.rollout_config
        sim = self.world.sim
        gait = GaitParams.from_policy_output(np.asarray(action, dtype=np.float64))
        before = self._state
        self._state, _ = episode.transition(sim, before, gait, cfg)
        info = {
            "cost": episode.cost(self._state, cfg),
            "fell": self._state.fell,
            "finished": self._state.finished,
            "sim_time": sim.time,
            "gait": gait,
        }
        return (
            episode.observation(sim),
            episode.reward(before, self._state, cfg),
            episode.terminated(self._state),
            episode.truncated(self._state, cfg),
            info,
        )

    def close(self) -> None:
        self.world.close()
