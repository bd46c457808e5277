"""Is Bullet's friction anchor what the MuJoCo twin lacks in the paper-code world? ONE JSON object.

    python benchmarks/quadruped_friction_anchor.py [--terrains 40] [--save]

Why: in `variant: paper-code` the MuJoCo twin walks every policy worse than PyBullet (docs/
worlds.md: on the 40 tuning terrains 100,000-100,039 the paper's draws +0.052 and the best
constant gait +0.070), and 46 contact settings did not close it. The Derpy's URDF declares
`<friction_anchor/>` on its feet, which Bullet uses to hold a foot's friction point in stance
and MuJoCo has no counterpart for. This flies the same terrains in PyBullet twice, in one run:
as the URDF says (the baseline) and with `frictionAnchor=0` on every link of the robot, paired
terrain by terrain (the paper's draw j = seed mod 10, drawn as its code drew them, and the best
constant gait). If the anchor were the difference, turning it off would move PyBullet towards
the twin by about the twin's gap.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "data" / "quadruped-friction-anchor.json"
GAIT = REPO / "src" / "pacplan" / "presets" / "priors" / "quadruped-gait-best.safetensors"
FIRST = 100_000  # the twin probe's tuning terrains (../shared/notes: quadruped-paper-code-twin)


def _without_anchors() -> None:
    """Every robot loaded from now on has frictionAnchor off on each link (the plane and the
    boxes are not URDF robots)."""
    import pybullet

    load = pybullet.loadURDF

    def patched(path: str, *args: Any, **kw: Any) -> int:
        body = load(path, *args, **kw)
        if "minitaur" in str(path):
            cid = kw.get("physicsClientId", 0)
            for link in range(-1, pybullet.getNumJoints(body, physicsClientId=cid)):
                pybullet.changeDynamics(body, link, frictionAnchor=0, physicsClientId=cid)
        return body

    pybullet.loadURDF = patched


def _arm(task: tuple[bool, int]) -> dict[str, Any]:
    anchors, terrains = task
    from safetensors.numpy import load_file

    from pacplan.io.paperdata import paper_data_dir
    from pacplan.worlds.quadruped.paper_prior import paper_draws
    from pacplan.worlds.quadruped.world import QuadrupedWorld

    if not anchors:
        _without_anchors()
    draws = paper_draws(paper_data_dir(), 10).astype(np.float32)
    gait = load_file(str(GAIT))["theta"].astype(np.float32)
    world = QuadrupedWorld(variant="paper-code", physics="bullet")
    rows, t0 = [], time.process_time()
    for seed in range(FIRST, FIRST + terrains):
        d, g = world.rollout(draws[seed % 10], seed), world.rollout(gait, seed)
        rows.append([d.cost, g.cost, int(d.fell), int(g.fell)])
    world.close()
    return {"rows": rows, "cpu_s": time.process_time() - t0}


def _paired(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    d = b - a
    return {"mean": round(float(d.mean()), 4),
            "standard_error": round(float(d.std(ddof=1) / np.sqrt(d.size)), 4)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--terrains", type=int, default=40)
    ap.add_argument("--save", action="store_true", help=f"also write {OUT.relative_to(REPO)}")
    args = ap.parse_args(argv)
    from pacplan.io.paperdata import paper_data_dir

    if paper_data_dir() is None:
        print("error: the paper's Minitaur prior is not here: run `pacplan data paper`",
              file=sys.stderr)
        return 2
    with ProcessPoolExecutor(2) as pool:
        on, off = pool.map(_arm, [(True, args.terrains), (False, args.terrains)])
    a, b = np.array(on["rows"]), np.array(off["rows"])
    result: dict[str, Any] = {
        "benchmark": "quadruped_friction_anchor", "world": "quadruped, variant paper-code, "
        "PyBullet", "terrains": [FIRST, FIRST + args.terrains],
        "policies": "the paper's draw (seed mod 10), the best constant gait"}
    for j, name in ((0, "paper_draws"), (1, "best_constant_gait")):
        result[name] = {"anchors_as_urdf": round(float(a[:, j].mean()), 4),
                        "anchors_off": round(float(b[:, j].mean()), 4),
                        "off_minus_on": _paired(a[:, j], b[:, j]),
                        "falls": [int(a[:, j + 2].sum()), int(b[:, j + 2].sum())]}
    result["cpu_s_per_rollout"] = [round(x["cpu_s"] / (2 * args.terrains), 3) for x in (on, off)]
    text = json.dumps(result, indent=1)
    print(text)
    if args.save:
        OUT.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
