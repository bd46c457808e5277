"""Gymnasium environment `pacplan/MinitaurTerrain-v0`: one step = one 0.5 s gait primitive.

A thin adapter over the shared episode step (`pacplan.worlds.quadruped.episode`), the same one
`QuadrupedWorld` certifies with. Observation: {"depth": (50, 50) float32 metres, "proprio": (22,)
float32}; with `image_obs="uint8"` the depth is (1, 50, 50) uint8 scaled 0–255 over 0 m to the
camera's far distance, the layout SB3's `MultiInputPolicy` takes as an image. Action: η ∈ [0, 1]^4,
the policy's sigmoid outputs, mapped to the sine gait exactly as the certified policies map them.
Reward: forward progress of the step divided by the 6 m goal, so an episode's return is 1 − cost
before clipping. The episode terminates on a fall or at the finish line and is truncated after 20
primitives (10 s simulated; the registered spec's `max_episode_steps` is 20 as well: pass
`max_episode_steps=` to `gym.make` with another `horizon_s`).
An observation that is not finite (PyBullet's renderer now and then leaves NaN depth pixels)
ends the episode as it ends a certified rollout: terminated, `info["sensor_fault"]` True, cost 1,
its last reward taking back the progress (the return stays 1 − cost), and the observation
returned with its non-finite values replaced (depth far, proprioception 0).
`reset(options={"terrain_seed": s})` walks the terrain of environment seed s, the same terrain
`QuadrupedWorld` uses for that seed. World options pass through `gym.make`, e.g.
`gym.make("pacplan/MinitaurTerrain-v0", physics="mujoco")` for the MuJoCo engine.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from pacplan.errors import PacplanError
from pacplan.worlds.as_gym import (
    RENDER_MODES,
    check_image_obs,
    check_render_mode,
    depth_observation,
    depth_space,
)
from pacplan.worlds.quadruped import episode
from pacplan.worlds.quadruped.episode import EpisodeState
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import IMAGE_SIZE, N_PROPRIO
from pacplan.worlds.quadruped.terrain import Terrain
from pacplan.worlds.quadruped.world import QuadrupedWorld

_MAX_TERRAIN_SEED = 2**31 - 1


class MinitaurTerrainEnv(gym.Env):
    """The quadruped world as a Gymnasium environment (keyword options as `QuadrupedWorld`).

    render_mode="rgb_array": `render()` draws the terrain from the side and from above with the
    torso's path walked so far and the current depth image (`frame.MinitaurFrame`).
    image_obs: "float" (metres, the certified layout) or "uint8" (see the module docstring).
    """

    # one frame per primitive: 0.5 s of walking
    metadata: dict[str, Any] = {"render_modes": RENDER_MODES, "render_fps": 2}  # noqa: RUF012

    def __init__(self, render_mode: str | None = None, image_obs: str = "float",
                 **world_options: Any) -> None:
        self.render_mode = check_render_mode(render_mode)
        self.image_obs = check_image_obs(image_obs)
        self.world = QuadrupedWorld(**world_options)
        if self.world.variant != "text":
            raise PacplanError(f"pacplan/MinitaurTerrain-v0 steps the text world's episode; "
                               f"variant {self.world.variant!r} is a world option for "
                               "certification runs only")
        far = self.world.camera.far_m
        self.observation_space = spaces.Dict(
            {
                "depth": depth_space(self.image_obs, far, IMAGE_SIZE),
                "proprio": spaces.Box(-np.inf, np.inf, (N_PROPRIO,), dtype=np.float32),
            }
        )
        self.action_space = spaces.Box(0.0, 1.0, (4,), dtype=np.float32)
        self.terrain_seed = -1
        self._state: EpisodeState | None = None
        self._terrain: Terrain | None = None
        self._path: list[tuple[float, float, float]] = []
        self._depth = np.full((IMAGE_SIZE, IMAGE_SIZE), far, dtype=np.float32)
        self._frame: Any = None
        self._last_obs: dict[str, np.ndarray] = {}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        super().reset(seed=seed)
        if options and "terrain_seed" in options:
            self.terrain_seed = int(options["terrain_seed"])
        else:
            self.terrain_seed = int(self.np_random.integers(0, _MAX_TERRAIN_SEED))
        sim = self.world.sim
        self._terrain = self.world.terrain(self.terrain_seed)
        self._state = episode.initial(sim, self._terrain)
        self._path = [tuple(sim.torso_pose()[0])]
        obs = self._observe()
        info = {"terrain_seed": self.terrain_seed, "sim_time": sim.time,
                "sensor_fault": self._state.sensor_fault}
        return obs, info

    def step(
        self, action: np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self._state is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        try:  # Gymnasium's convention: an action outside the space is an error, not clipped
            inside = self.action_space.contains(np.asarray(action, self.action_space.dtype))
        except (TypeError, ValueError):
            inside = False
        if not inside:
            raise ValueError(f"action must lie in the action space {self.action_space}, "
                             f"got {action!r}")
        cfg = self.world.rollout_config
        sim = self.world.sim
        gait = GaitParams.from_policy_output(np.asarray(action, dtype=np.float64))
        before = self._state
        if before.sensor_fault:  # ended on an unreadable observation (at reset): no walk
            obs = self._last_obs
        else:
            # recording the path only reads poses the fall/finish checks read anyway
            self._state, outcome = episode.transition(
                sim, before, gait, cfg, record_path=self.render_mode is not None
            )
            self._path.extend((x, y, z) for _, x, y, z in outcome.path)
            obs = self._observe()
        info = {
            "cost": episode.cost(self._state, cfg),
            "fell": self._state.fell,
            "finished": self._state.finished,
            "sensor_fault": self._state.sensor_fault,
            "sim_time": sim.time,
            "gait": gait,
        }
        return (
            obs,
            episode.reward(before, self._state, cfg),
            episode.terminated(self._state),
            episode.truncated(self._state, cfg),
            info,
        )

    def render(self) -> np.ndarray | None:
        """The current frame (H, W, 3) uint8 with render_mode="rgb_array", else None."""
        if self.render_mode is None:
            gym.logger.warn('render() needs render_mode="rgb_array" in gym.make(...)')
            return None
        if self._state is None or self._terrain is None:
            raise gym.error.ResetNeeded("call reset() before render()")
        if self._frame is None:
            from pacplan.worlds.quadruped.frame import MinitaurFrame

            self._frame = MinitaurFrame(self.world.camera.far_m, IMAGE_SIZE)
        finish_x = self._state.x0 + self.world.rollout_config.finish_dx
        return self._frame.draw(self._terrain, np.array(self._path), finish_x, self._depth,
                                self._caption(), self._state.fell)

    def close(self) -> None:
        self.world.close()
        self._frame = None
        self._state = None  # step() after close() asks for reset(), never reaches the engine

    def _observe(self) -> dict[str, np.ndarray]:
        """The episode's observation (depth kept in metres for frames) in the chosen layout;
        one that is not finite ends the episode (a sensor fault, cost 1) and is returned
        with its non-finite values replaced, so it stays in the observation space."""
        obs = episode.observation(self.world.sim)
        if episode.sensor_fault(obs):
            assert self._state is not None
            self._state = episode.faulted(self._state)
            far = self.world.camera.far_m
            obs = {"depth": np.nan_to_num(obs["depth"], nan=far, posinf=far, neginf=0.0),
                   "proprio": np.nan_to_num(obs["proprio"], nan=0.0, posinf=0.0, neginf=0.0)}
        self._depth = obs["depth"]
        self._last_obs = {**obs, "depth": depth_observation(obs["depth"], self.image_obs,
                                                            self.world.camera.far_m)}
        return self._last_obs

    def _caption(self) -> str:
        """A few lines: terrain, step, progress, cost and how the walk ended."""
        assert self._state is not None
        cfg = self.world.rollout_config
        state = self._state
        lines = [
            f"Minitaur, terrain {self.terrain_seed}",
            f"step {state.primitives} of {cfg.max_primitives} ({cfg.primitive_s:g} s each)",
            f"walked {state.x - state.x0:+.2f} of {cfg.finish_dx:g} m",
            f"cost {episode.cost(state, cfg):.3f}",
        ]
        if state.sensor_fault:
            lines.append("ended by an unreadable observation (cost 1)")
        elif state.fell or state.finished:
            lines.append("fell" if state.fell else "crossed the finish line")
        return "\n".join(lines)
