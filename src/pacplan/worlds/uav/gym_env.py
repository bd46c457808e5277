"""Gymnasium environment `pacplan/UAVObstacleField-v0`: one scene, one primitive per step.

Observation: the 50x50 z-depth image (metres, float32). Action: Discrete(25), the primitive index
(5 * ix + iz over offsets (-1, -0.5, 0, 0.5, 1) m). Reward: 0 per step, and −cost = −(1 − t_c/T)
on the step that collides, so an episode's return is minus the world's cost. The episode
terminates on collision or after 12 primitives (the horizon is part of the task: T = 12 s).

A thin adapter (in the manner of Brax's Gym wrapper) over the functional core in `dynamics`,
which the batched simulator and the PyBullet rollouts step through as well; the simulator only
supplies geometry (`scene_sim.SceneSimulator`) and is built once, on the first reset.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from pacplan.validation import check_choice
from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.scene import Scene, sample_scene
from pacplan.worlds.uav.scene_sim import SIMULATORS, SceneSimulator, open_scene_simulator


class UAVObstacleFieldEnv(gym.Env):
    """The UAV world one decision at a time (simulator "batched" on CPU, or "bullet").

    reset(options={"scene_seed": s}) flies environment s of the world; without it the scene seed
    is drawn from the env's RNG (so reset(seed=...) is reproducible).
    """

    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012

    def __init__(self, simulator: str = "batched") -> None:
        self.simulator = check_choice("UAV simulator", simulator, SIMULATORS)
        self.observation_space = gym.spaces.Box(
            0.0, spec.FAR, shape=(spec.IMG, spec.IMG), dtype=np.float32
        )
        self.action_space = gym.spaces.Discrete(spec.N_PRIMS)
        self._sim: SceneSimulator | None = None
        self.scene: Scene | None = None
        self.state = dyn.initial()
        self.position = dyn.position(self.state)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if options and "scene_seed" in options:
            scene_seed = int(options["scene_seed"])
        else:
            scene_seed = int(self.np_random.integers(0, 2**31 - 1))
        if self._sim is None:
            self._sim = open_scene_simulator(self.simulator)
        self.scene = sample_scene(scene_seed)
        self._sim.load(self.scene)
        self.state = dyn.initial()
        self.position = dyn.position(self.state)
        info = {"scene_seed": scene_seed, "position": self.position.copy()}
        return self._sim.render(self.position), info

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._sim is None or self.scene is None:
            raise RuntimeError("call reset() before step()")
        if dyn.terminal(self.state):
            raise RuntimeError("the episode is over; call reset()")
        prim = int(action)
        if not self.action_space.contains(prim):
            raise ValueError(f"action must be in 0..24, got {action}")
        first = self._sim.sweep(self.position, prim)
        state, self.state = self.state, dyn.transition(self.state, prim, first)
        self.position = dyn.stop_position(state, prim, first)
        info = {"checks": int(self.state.checks), "position": self.position.copy()}
        reward = dyn.reward(state, self.state)
        terminated = bool(dyn.terminal(self.state))
        return self._sim.render(self.position), reward, terminated, False, info

    def close(self) -> None:
        if self._sim is not None:
            self._sim.close()
            self._sim = None
