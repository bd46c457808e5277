"""The motion primitive: an open-loop sine gait, expressed in the Minitaur leg model.

Leg model (PyBullet's Minitaur convention). Legs are ordered front-left, back-left, front-right,
back-right and each has two motors (L, R), giving motor order
[FL.L, FL.R, BL.L, BL.R, FR.L, FR.R, BR.L, BR.R]. A leg command is a pair (extension e, swing s)
in [-1, 1]; in an 8-vector of leg-model actions, entries 0..3 are the extensions of legs 0..3 and
entries 4..7 their swings. Motor i of leg l = i // 2 is driven to

    angle_i = π − (π/4)(s_l + 1.5) + σ_i (π/4) e_l,   σ_i = (−1)^i for the left legs (i < 4),
                                                      σ_i = −(−1)^i for the right legs,

so swing turns both motors of a leg together (the leg rotates fore/aft about the hip) and
extension turns them apart (the knee linkage lengthens or shortens the leg). The 1.5 offset keeps
the linkage away from its singular, fully stretched configuration.

The sine gait of the paper drives extensions with a trot pattern (diagonal legs in phase):
u1 = (a1 + a_st) sin φ, u2 = (a1 − a_st) sin(φ + π), u3 = a2 sin φ, u4 = a2 sin(φ + π), sent as
[u1, u2, u2, u1, u3, u4, u4, u3]. The steering amplitude a_st makes one diagonal pair stride
longer than the other, which turns the robot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

N_MOTORS = 8
# σ_i: sign of the extension term for motor i.
_EXT_SIGN = np.array([1.0, -1.0, 1.0, -1.0, -1.0, 1.0, -1.0, 1.0])
_LEG_OF_MOTOR = np.arange(N_MOTORS) // 2
_SINGULARITY_OFFSET = 1.5


def leg_model_to_motor_angles(actions: np.ndarray) -> np.ndarray:
    """(..., 8) leg-model actions [e_0..e_3, s_0..s_3] -> (..., 8) motor angles (rad)."""
    a = np.asarray(actions, dtype=np.float64)
    ext = a[..., _LEG_OF_MOTOR]
    swing = a[..., 4 + _LEG_OF_MOTOR]
    quarter = math.pi / 4
    return math.pi - quarter * (swing + _SINGULARITY_OFFSET) + _EXT_SIGN * quarter * ext


@dataclass(frozen=True)
class GaitParams:
    """Amplitudes a1 (extension), a2 (swing), a_st (steering) and angular frequency ω (rad/s)."""

    a1: float
    a2: float
    a_st: float
    omega: float

    @classmethod
    def from_policy_output(cls, eta: np.ndarray) -> GaitParams:
        """Map the policy's sigmoid outputs η ∈ [0, 1]^4 to gait parameters (the paper's map).

        a1 = 0.8 η1 + 0.2, a2 = 0.8 η2 + 0.2, ω = 20 η3 + 20, a_st = min(η4, 1 − a1, 1 − a2);
        the cap on a_st keeps every leg-model command inside [-1, 1].
        """
        e = np.clip(np.asarray(eta, dtype=np.float64).reshape(4), 0.0, 1.0)
        a1 = 0.8 * e[0] + 0.2
        a2 = 0.8 * e[1] + 0.2
        omega = 20.0 * e[2] + 20.0
        a_st = min(e[3], 1.0 - a1, 1.0 - a2)
        return cls(a1=float(a1), a2=float(a2), a_st=float(a_st), omega=float(omega))

    def policy_output(self) -> np.ndarray:
        """The η that `from_policy_output` maps to these parameters: its inverse, unclipped
        (outside [0, 1] for a gait the map cannot reach)."""
        return np.array([(self.a1 - 0.2) / 0.8, (self.a2 - 0.2) / 0.8,
                         (self.omega - 20.0) / 20.0, self.a_st])


_libm_sin = np.vectorize(math.sin, otypes=[np.float64])


def gait_actions(params: GaitParams, phase: np.ndarray) -> np.ndarray:
    """Leg-model actions (len(phase), 8) of the sine gait at gait phases φ (rad)."""
    ph = np.asarray(phase, dtype=np.float64)
    # the C library's sin, not NumPy's: on AVX-512 CPUs np.sin takes NumPy's own kernels, whose
    # last bits differ, and these targets drive the simulation whose costs must be the same
    # bits on every CPU (docs/reproducibility.md); on other CPUs the two agree bit for bit
    s = _libm_sin(ph)
    s_shift = _libm_sin(ph + math.pi)
    u1 = (params.a1 + params.a_st) * s
    u2 = (params.a1 - params.a_st) * s_shift
    u3 = params.a2 * s
    u4 = params.a2 * s_shift
    return np.stack([u1, u2, u2, u1, u3, u4, u4, u3], axis=-1)


def gait_motor_angles(params: GaitParams, phase: np.ndarray) -> np.ndarray:
    """Motor angle targets (len(phase), 8) of the sine gait at gait phases φ."""
    return leg_model_to_motor_angles(gait_actions(params, phase))


# The reference open-loop gait (docs/design.md): straight trot, a1 = a2 = 0.5, ω = 30 rad/s,
# no steering.
REFERENCE_GAIT = GaitParams(a1=0.5, a2=0.5, a_st=0.0, omega=30.0)

# Pose the gait passes through at φ = 0 (all leg-model commands zero); the robot settles here.
NEUTRAL_MOTOR_ANGLES = leg_model_to_motor_angles(np.zeros(N_MOTORS))
