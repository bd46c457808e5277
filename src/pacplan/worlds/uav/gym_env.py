"""Gymnasium environment `pacplan/UAVObstacleField-v0`: one scene, one primitive per step.

Observation: the 50x50 z-depth image (metres, float32). Action: Discrete(25), the primitive index
(5 * ix + iz over offsets (-1, -0.5, 0, 0.5, 1) m). Reward: 0 per step, and −cost = −(1 − t_c/T)
on the step that collides, so an episode's return is minus the world's cost. The episode
terminates on collision or after 12 primitives (the horizon is part of the task: T = 12 s).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from pacplan.worlds.uav import primitives as prims
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.results import cost_from_checks
from pacplan.worlds.uav.scene import Scene, sample_scene


class UAVObstacleFieldEnv(gym.Env):
    """The UAV world one decision at a time (simulator "batched" on CPU, or "bullet").

    reset(options={"scene_seed": s}) flies environment s of the world; without it the scene seed
    is drawn from the env's RNG (so reset(seed=...) is reproducible).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, simulator: str = "batched") -> None:
        if simulator not in ("batched", "bullet"):
            raise ValueError(f"unknown simulator {simulator!r}")
        self.simulator = simulator
        self.observation_space = gym.spaces.Box(
            0.0, spec.FAR, shape=(spec.IMG, spec.IMG), dtype=np.float32
        )
        self.action_space = gym.spaces.Discrete(spec.N_PRIMS)
        self._sim: Any = None
        self.scene: Scene | None = None
        self.pos = np.array(spec.START, dtype=np.float64)
        self.step_index = 0

    def _render(self) -> np.ndarray:
        if self.simulator == "bullet":
            return self._sim.render(self.pos)
        from pacplan.worlds.uav.batched import render_positions

        return render_positions(self.scene, self.pos[None])[0].astype(np.float32)

    def _sweep(self, prim: int) -> int:
        if self.simulator == "bullet":
            return self._sim.sweep(self.pos, prim)
        from pacplan.worlds.uav.batched import sweep_primitive

        return sweep_primitive(self.scene, self.pos, prim)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options and "scene_seed" in options:
            scene_seed = int(options["scene_seed"])
        else:
            scene_seed = int(self.np_random.integers(0, 2**31 - 1))
        self.scene = sample_scene(scene_seed)
        if self.simulator == "bullet":
            if self._sim is None:
                from pacplan.worlds.uav.bullet import BulletSimulator

                self._sim = BulletSimulator()
            self._sim.load(self.scene)
        self.pos = np.array(spec.START, dtype=np.float64)
        self.step_index = 0
        return self._render(), {"scene_seed": scene_seed, "position": self.pos.copy()}

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self.scene is None:
            raise RuntimeError("call reset() before step()")
        prim = int(action)
        if not self.action_space.contains(prim):
            raise ValueError(f"action must be in 0..24, got {action}")
        first = self._sweep(prim)
        info: dict[str, Any] = {"checks": 0}
        if first:
            checks = self.step_index * spec.CHECKS_PER_PRIM + first
            self.pos = self.pos + prims.check_displacements()[prim, first - 1]
            info.update(checks=checks, position=self.pos.copy())
            reward = -float(cost_from_checks(np.array(checks)))
            return self._render(), reward, True, False, info
        self.pos = self.pos + prims.check_displacements()[prim, -1]
        self.step_index += 1
        info["position"] = self.pos.copy()
        return self._render(), 0.0, self.step_index >= spec.N_STEPS, False, info

    def close(self) -> None:
        if self._sim is not None:
            self._sim.close()
            self._sim = None
