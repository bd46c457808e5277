"""Gymnasium environment `pacplan/UAVObstacleField-v0`: one scene, one primitive per step.

Observation: the 50x50 z-depth image (metres, float32), or with `image_obs="uint8"` the same
image as (1, 50, 50) uint8 scaled 0–255 over 0–20 m, the layout SB3's `CnnPolicy` takes.
Action: Discrete(25), the primitive index (5 * ix + iz over offsets (-1, -0.5, 0, 0.5, 1) m).
Reward: 0 per step, and −cost = −(1 − t_c/T) on the step that collides, so an episode's return
is minus the world's cost. The episode terminates on collision or after 12 primitives (the
horizon is part of the task: T = 12 s); the registered spec's `max_episode_steps` is 12 as well.

A thin adapter (in the manner of Brax's Gym wrapper) over the functional core in `dynamics`,
which the batched simulator and the PyBullet rollouts step through as well; the simulator only
supplies geometry (`scene_sim.SceneSimulator`) and is built once, on the first reset.

Torch runs with `torch_threads` CPU threads (default 1) inside reset and step, and the process's
setting is restored on the way out: a 2-thread parallel region waits for a descheduled thread at
every op, which on a busy machine drops the env from hundreds of steps/s to a few, and a forked
child (`gym.make_vec(..., vectorization_mode="async")`) of a parent that already ran torch
deadlocks in OpenMP's inherited thread pool unless it stays on one thread.
"""

from __future__ import annotations

import contextlib
from typing import Any

import gymnasium as gym
import numpy as np

from pacplan.validation import check_choice
from pacplan.worlds.as_gym import (
    RENDER_MODES,
    check_image_obs,
    check_render_mode,
    depth_observation,
    depth_space,
)
from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.scene import Scene, sample_scene
from pacplan.worlds.uav.scene_sim import SIMULATORS, SceneSimulator, open_scene_simulator


class UAVObstacleFieldEnv(gym.Env):
    """The UAV world one decision at a time (simulator "batched" on CPU, or "bullet").

    reset(options={"scene_seed": s}) flies environment s of the world; without it the scene seed
    is drawn from the env's RNG (so reset(seed=...) is reproducible). render_mode="rgb_array":
    `render()` draws the tunnel from above and from the side with the path flown so far and the
    current depth image (`frame.UAVFrame`). torch_threads: torch CPU threads inside reset and
    step (0 leaves torch's setting; see the module docstring for why 1 is the default).
    """

    # one frame per primitive: 1 s of flight
    metadata: dict[str, Any] = {"render_modes": RENDER_MODES, "render_fps": 1}  # noqa: RUF012

    def __init__(self, simulator: str = "batched", render_mode: str | None = None,
                 image_obs: str = "float", torch_threads: int = 1) -> None:
        self.simulator = check_choice("UAV simulator", simulator, SIMULATORS)
        self.render_mode = check_render_mode(render_mode)
        self.image_obs = check_image_obs(image_obs)
        self.torch_threads = int(torch_threads)
        self.observation_space = depth_space(self.image_obs, spec.FAR, spec.IMG)
        self.action_space = gym.spaces.Discrete(spec.N_PRIMS)
        self._sim: SceneSimulator | None = None
        self._closed = False
        self._frame: Any = None
        self.scene: Scene | None = None
        self.scene_seed = -1
        self.state = dyn.initial()
        self.position = dyn.position(self.state)
        self._flown: list[np.ndarray] = [self.position]
        self._decisions: list[np.ndarray] = []
        self._last_prim: int | None = None
        self._depth = np.full((spec.IMG, spec.IMG), spec.FAR, dtype=np.float32)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._closed = False  # reset after close() opens the simulator again
        if options and "scene_seed" in options:
            self.scene_seed = int(options["scene_seed"])
        else:
            self.scene_seed = int(self.np_random.integers(0, 2**31 - 1))
        with self._torch_scope():
            if self._sim is None:
                self._sim = open_scene_simulator(self.simulator)
            self.scene = sample_scene(self.scene_seed)
            self._sim.load(self.scene)
            self.state = dyn.initial()
            self.position = dyn.position(self.state)
            self._flown, self._decisions, self._last_prim = [self.position], [], None
            info = {"scene_seed": self.scene_seed, "position": self.position.copy()}
            return self._observe(), info

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        # Gymnasium's convention: an action outside the action space is an error, never
        # rounded (2.5), parsed ("7") or taken as a number (True)
        if isinstance(action, (bool, np.bool_)) or not self.action_space.contains(action):
            raise ValueError(f"action must be an integer primitive index in 0..{spec.N_PRIMS - 1} "
                             f"(the action space {self.action_space}), got {action!r}")
        if self._sim is None or self.scene is None:
            raise RuntimeError("the env is closed; call reset() to start a new episode"
                               if self._closed else "call reset() before step()")
        if dyn.terminal(self.state):
            raise RuntimeError("the episode is over; call reset()")
        prim = int(action)
        with self._torch_scope():
            first = self._sim.sweep(self.position, prim)
            state, self.state = self.state, dyn.transition(self.state, prim, first)
            self.position = dyn.stop_position(state, prim, first)
            self._decisions.append(dyn.position(state))
            self._last_prim = prim
            self._flown.extend(dyn.check_points(state, prim)[: first or spec.CHECKS_PER_PRIM])
            info = {"checks": int(self.state.checks), "position": self.position.copy()}
            reward = dyn.reward(state, self.state)
            terminated = bool(dyn.terminal(self.state))
            return self._observe(), reward, terminated, False, info

    def render(self) -> np.ndarray | None:
        """The current frame (H, W, 3) uint8 with render_mode="rgb_array", else None."""
        if self.render_mode is None:
            gym.logger.warn('render() needs render_mode="rgb_array" in gym.make(...)')
            return None
        if self.scene is None:
            raise RuntimeError("call reset() before render()")
        if self._frame is None:
            from pacplan.worlds.uav.frame import UAVFrame

            self._frame = UAVFrame()
        collided = bool(self.state.checks)
        return self._frame.draw(self.scene, np.array(self._flown), np.array(self._decisions),
                                collided, self._depth, self._caption(collided))

    def close(self) -> None:
        if self._sim is not None:
            self._sim.close()
            self._sim = None
        self._frame = None
        self._closed = True

    def _observe(self) -> np.ndarray:
        """Render depth at the current position (kept for frames) in the observation layout."""
        assert self._sim is not None
        self._depth = self._sim.render(self.position)
        return depth_observation(self._depth, self.image_obs, spec.FAR)

    def _torch_scope(self) -> contextlib.AbstractContextManager[None]:
        """Run torch with `torch_threads` threads (the batched simulator only; it holds torch)."""
        if self.simulator != "batched" or self.torch_threads <= 0:
            return contextlib.nullcontext()
        from pacplan.worlds.uav.batched import torch_threads_scope

        return torch_threads_scope(self.torch_threads)

    def _caption(self, collided: bool) -> str:
        """A few lines: scene, step, last primitive and how the flight stands."""
        step = int(self.state.step)
        lines = [f"UAV world, scene {self.scene_seed}", f"step {step} of {spec.N_STEPS} (1 s each)"]
        if self._last_prim is not None:
            dx, dz = spec.primitive_offsets()[self._last_prim]
            lines.append(f"primitive {self._last_prim}: dx {dx:+.1f}, dz {dz:+.1f} m")
        if collided:
            t_c = int(self.state.checks) * spec.CHECK_DT
            lines.append(f"collided at t = {t_c:.2f} s")
            lines.append(f"cost {float(dyn.cost(self.state)):.3f}")
        elif step >= spec.N_STEPS:
            lines.append("no collision in 12 s, cost 0")
        return "\n".join(lines)
