"""Gymnasium environment `pacplan/MinitaurTerrain-v0`: one step = one 0.5 s gait primitive.

Observation: {"depth": (50, 50) float32 metres, "proprio": (22,) float32}. Action: η ∈ [0, 1]^4,
the policy's sigmoid outputs, mapped to the sine gait exactly as the certified policies map them.
Reward: forward progress of the step divided by the 6 m goal, so an episode's return is
1 − cost before clipping. The episode terminates on a fall or at the finish line and is truncated
after 20 primitives (10 s simulated). `reset(options={"terrain_seed": s})` walks the terrain of
environment seed s, the same terrain `QuadrupedWorld` uses for that seed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import IMAGE_SIZE, N_PROPRIO
from pacplan.worlds.quadruped.rollout import cost_from_displacement
from pacplan.worlds.quadruped.terrain import sample_terrain
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
        self._x0 = 0.0
        self._x = 0.0
        self._primitives = 0
        self.terrain_seed = -1

    def _observe(self) -> dict[str, np.ndarray]:
        sim = self.world.sim
        return {
            "depth": sim.depth_image(),
            "proprio": sim.proprioception().astype(np.float32),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if options and "terrain_seed" in options:
            self.terrain_seed = int(options["terrain_seed"])
        else:
            self.terrain_seed = int(self.np_random.integers(0, _MAX_TERRAIN_SEED))
        terrain = sample_terrain(
            self.terrain_seed, self.world.max_slope_deg, self.world.plank_length
        )
        sim = self.world.sim
        sim.reset(terrain)
        self._x0 = self._x = float(sim.torso_pose()[0][0])
        self._primitives = 0
        return self._observe(), {"terrain_seed": self.terrain_seed, "sim_time": sim.time}

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        cfg = self.world.rollout_config
        sim = self.world.sim
        params = GaitParams.from_policy_output(np.asarray(action, dtype=np.float64))
        outcome = sim.run_primitive(
            params, cfg.primitive_s, finish_x=self._x0 + cfg.finish_dx, record_path=False
        )
        self._primitives += 1
        x = float(sim.torso_pose()[0][0])
        reward = (x - self._x) / cfg.finish_dx
        self._x = x
        terminated = outcome.fell or outcome.finished
        truncated = not terminated and self._primitives >= round(cfg.horizon_s / cfg.primitive_s)
        info = {
            "cost": cost_from_displacement(x - self._x0, cfg.finish_dx),
            "fell": outcome.fell,
            "finished": outcome.finished,
            "sim_time": sim.time,
            "gait": params,
        }
        return self._observe(), float(reward), terminated, truncated, info

    def close(self) -> None:
        if self.world._sim is not None:
            self.world._sim.close()
