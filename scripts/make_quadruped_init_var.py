"""Write the quadruped ES's per-weight starting variance, quadruped-init-var.safetensors.

    python scripts/make_quadruped_init_var.py

Why: the policy sees raw inputs of very different sizes (depth up to 10 m, motor angles ≈ 2 rad,
motor velocities ≈ 20 rad/s, torso x up to 6 m), so one σ for every weight lets the velocity
weights swamp each perturbation with noise while the angle weights barely move the gait (a
single σ² = 3e-3 made training worse, σ² = 1e-3 barely moved it). Here each weight's σ is set from
the root-mean-square of the input it multiplies, measured while the best constant gait
(quadruped-gait-best.safetensors) walks 12 prior-training terrains, so that every input perturbs
the logits alike:

- linear weights: σ = 1 / (√222 · rms(input)) (all 222 inputs together perturb a logit by ≈ 1;
  a depth feature's rms is taken as 0.3, what the conv perturbation below gives through tanh);
- conv weights: σ = 0.3 / (5 · rms(depth pixel)) (a 5 × 5 patch's output moves by ≈ 0.3);
- conv biases 0.3; output biases 0.5 (the gait itself is explored).

It lands beside quadruped-prior.yaml in src/pacplan/presets/priors/ (shipped in the package).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

from pacplan.worlds.quadruped import QuadrupedWorld
from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import (
    CHANNELS,
    KERNEL,
    N_FEATURES,
    N_OUT,
    N_PROPRIO,
    POLICY_DIM,
    policy_action,
)
from pacplan.worlds.quadruped.rollout import rollout

PRIORS = Path(__file__).resolve().parents[1] / "src" / "pacplan" / "presets" / "priors"
OUT = PRIORS / "quadruped-init-var.safetensors"
SEEDS = range(3000, 3012)  # prior-training range
FEATURE_RMS = 0.3


def input_rms(theta: np.ndarray) -> tuple[np.ndarray, float]:
    """(22,) rms of the proprioceptive inputs and the rms of a depth pixel, over the rollouts."""
    world = QuadrupedWorld(max_slope_deg=23.3, physics="mujoco", robot="derpy")
    proprio: list[np.ndarray] = []
    pixels: list[float] = []

    def controller(depth: np.ndarray, prop: np.ndarray) -> GaitParams:
        proprio.append(np.asarray(prop, dtype=np.float64))
        pixels.append(float(np.mean(np.square(depth))))
        return GaitParams.from_policy_output(policy_action(theta, depth, prop))

    for seed in SEEDS:
        rollout(world.sim, world.terrain(seed), controller, world.rollout_config)
    world.close()
    return np.sqrt(np.mean(np.square(proprio), axis=0)), float(np.sqrt(np.mean(pixels)))


def init_sigma(proprio_rms: np.ndarray, pixel_rms: float) -> np.ndarray:
    """(944,) σ per weight, in the policy's flat layout (conv w, conv b, linear w, linear b)."""
    c = 1.0 / np.sqrt(N_FEATURES + N_PROPRIO)
    row = np.concatenate([np.full(N_FEATURES, c / FEATURE_RMS), c / proprio_rms])
    sigma = np.concatenate([
        np.full(CHANNELS * KERNEL * KERNEL, 0.3 / (KERNEL * pixel_rms)),
        np.full(CHANNELS, 0.3),
        np.tile(row, N_OUT),
        np.full(N_OUT, 0.5),
    ])
    assert sigma.shape == (POLICY_DIM,)
    return sigma


if __name__ == "__main__":
    theta = load_file(str(PRIORS / "quadruped-gait-best.safetensors"))["theta"]
    prms, drms = input_rms(theta.astype(np.float64))
    sigma = init_sigma(prms, drms)
    save_file({"theta": np.square(sigma).astype(np.float32)}, str(OUT))
    print(OUT, "proprio rms", np.round(prms, 3).tolist(), "pixel rms", round(drms, 3))
