"""Write priors/quadruped-gait-init.safetensors, the ES starting mean of quadruped-prior.yaml.

    python scripts/make_quadruped_gait_init.py

The weights run DESIGN.md's reference gait (a1 = a2 = 0.5, ω = 30 rad/s, no steering) whatever the
policy sees (`pacplan.worlds.quadruped.policy.gait_theta`); ES then learns from there.
"""

from __future__ import annotations

from pathlib import Path

from safetensors.numpy import save_file

from pacplan.worlds.quadruped.gait import REFERENCE_GAIT
from pacplan.worlds.quadruped.policy import gait_theta

if __name__ == "__main__":
    out = Path(__file__).resolve().parent.parent / "priors" / "quadruped-gait-init.safetensors"
    save_file({"theta": gait_theta(REFERENCE_GAIT).astype("float32")}, str(out))
    print(out)
