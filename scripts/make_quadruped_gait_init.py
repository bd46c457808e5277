"""Write the quadruped-prior preset's ES starting mean, quadruped-gait-init.safetensors.

    python scripts/make_quadruped_gait_init.py

It lands in src/pacplan/presets/priors/ beside quadruped-prior.yaml (the file is shipped in the
package; run this from a checkout). The weights run docs/design.md's reference gait (a1 = a2 = 0.5,
ω = 30 rad/s, no steering) whatever the policy sees (`pacplan.worlds.quadruped.policy.gait_theta`);
ES then learns from there.
"""

from __future__ import annotations

from pathlib import Path

from safetensors.numpy import save_file

from pacplan.worlds.quadruped.gait import REFERENCE_GAIT
from pacplan.worlds.quadruped.policy import gait_theta

OUT = (Path(__file__).resolve().parents[1] / "src" / "pacplan" / "presets" / "priors"
       / "quadruped-gait-init.safetensors")

if __name__ == "__main__":
    save_file({"theta": gait_theta(REFERENCE_GAIT).astype("float32")}, str(OUT))
    print(OUT)
