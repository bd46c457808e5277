"""Cross-validation of the batched simulator against the PyBullet oracle.

Three checks on the same seeds and policies (DESIGN.md / issue 3):
  (a) depth images at the same poses (the poses the batched closed loop visits);
  (b) collision times when both replay the same primitive sequences (the closed-loop ones and
      uniformly random ones, which collide more often and probe more geometry);
  (c) closed-loop costs.
Every disagreement is returned with what is needed to explain it: for (b) the analytic
clearance (distance to the nearest shape minus the robot radius) at the checks where the two
differ; for (c) the step where the flights part, the batched Depth Filter + net score margin
between the two choices there, and the image difference at that pose (the flights are identical
up to that step, so a split can only come from the two images at that pose).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pacplan.worlds.uav import primitives as prims
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.batched import BatchedSimulator, render_positions
from pacplan.worlds.uav.bullet import BulletSimulator
from pacplan.worlds.uav.policy_np import NumpyPolicy
from pacplan.worlds.uav.scene import Scene, point_cylinder_distance, sample_scene


def test_policies(k: int, seed: int = 12345) -> np.ndarray:
    """k policies from N(0, σ²), half with σ = 0.1 and half with σ = 0.3: the range where the net
    changes decisions often (first primitives differ in 25-70 % of environments)."""
    rng = np.random.default_rng(seed)
    sig = np.where(np.arange(k) < k // 2, 0.1, 0.3)[:, None]
    return (rng.normal(size=(k, spec.POLICY_DIM)) * sig).astype(np.float32)


def clearance(scene: Scene, pos: np.ndarray) -> float:
    """Distance from the robot surface to the nearest shape (negative: penetration)."""
    d = point_cylinder_distance(pos, scene.centres, scene.axes, scene.radii).min()
    planes = min(spec.WALL_X - abs(pos[0]), pos[2] - spec.FLOOR_Z, spec.CEIL_Z - pos[2])
    return float(min(d, planes) - spec.ROBOT_RADIUS)


def depth_edges(images: np.ndarray, jump: float = 0.1) -> np.ndarray:
    """Pixels next to a depth discontinuity: some 8-neighbour differs by more than `jump`
    (relative). Silhouette pixels are where a sampled renderer and a ray caster can see
    different surfaces; the cross-validation counts a pixel as on an edge when it is one in
    either simulator's image."""
    pad = np.pad(images, [(0, 0), (1, 1), (1, 1)], mode="edge")
    h, w = images.shape[-2:]
    out = np.zeros(images.shape, dtype=bool)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            nb = pad[:, 1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]
            out |= np.abs(nb - images) > jump * np.minimum(nb, images)
    return out


def _positions_along(seq: np.ndarray, checks: int) -> list[np.ndarray]:
    """Decision positions (start of each flown primitive)."""
    disp = prims.check_displacements()
    pos = np.array(spec.START, dtype=np.float64)
    out = []
    for step, k in enumerate(seq):
        if k < 0:
            break
        out.append(pos.copy())
        if checks and (checks - 1) // spec.CHECKS_PER_PRIM == step:
            break
        pos = pos + disp[k, -1]
    return out


def check_position(seq: np.ndarray, check: int) -> np.ndarray:
    """Robot position at global check index `check` (1..240) along a primitive sequence."""
    disp = prims.check_displacements()
    step, i = divmod(check - 1, spec.CHECKS_PER_PRIM)
    pos = np.array(spec.START, dtype=np.float64)
    for k in seq[:step]:
        pos = pos + disp[k, -1]
    return pos + disp[seq[step], i]


def run(
    seeds: np.ndarray,
    thetas: np.ndarray,
    net_scale: float = spec.DEFAULT_NET_SCALE,
    compile: bool = False,
    random_sequences: bool = True,
) -> dict[str, Any]:
    """All three checks; returns figures and the list of every disagreement."""
    seeds = np.asarray(seeds, dtype=np.int64)
    k = len(thetas)
    batched = BatchedSimulator(compile=compile)
    bullet = BulletSimulator()
    out: dict[str, Any] = {"seeds": len(seeds), "policies": k, "net_scale": net_scale}

    # (c) closed loop
    ra = batched.rollout(thetas, seeds, net_scale=net_scale)
    rb = bullet.rollout(thetas, seeds, net_scale=net_scale)
    same = ra.checks == rb.checks
    out["closed_loop"] = {
        "rollouts": int(same.size),
        "mean_cost_batched": float(ra.costs.mean()),
        "mean_cost_bullet": float(rb.costs.mean()),
        "mean_cost_diff_pp": float(100 * (ra.costs.mean() - rb.costs.mean())),
        "share_identical_cost": float(same.mean()),
        "share_identical_primitives": float((ra.prims == rb.prims).all(-1).mean()),
    }
    policies = [NumpyPolicy(t, net_scale) for t in thetas]
    closed = []
    for i, j in zip(*np.nonzero(~same), strict=True):
        scene = sample_scene(int(seeds[i]))
        differ = np.nonzero(ra.prims[i, j] != rb.prims[i, j])[0]
        rec: dict[str, Any] = {
            "seed": int(seeds[i]),
            "policy": int(j),
            "checks_batched": int(ra.checks[i, j]),
            "checks_bullet": int(rb.checks[i, j]),
        }
        if len(differ):
            step = int(differ[0])
            pos = _positions_along(ra.prims[i, j], 0)[step]
            img_a = render_positions(scene, pos[None])[0]
            bullet.load(scene)
            img_b = bullet.render(pos)
            s = policies[j].scores(img_a)
            pa, pb = int(ra.prims[i, j, step]), int(rb.prims[i, j, step])
            rec.update(
                first_different_step=step,
                prim_batched=pa,
                prim_bullet=pb,
                score_margin_m=float(s[pa] - s[pb]),
                # the same policy code on each simulator's own image reproduces each choice, so
                # the split comes from the images alone
                choices_follow_images=bool(
                    policies[j].choose(img_a) == pa and policies[j].choose(img_b) == pb
                ),
                image_max_abs_diff_m=float(np.abs(img_a - img_b).max()),
                image_pixels_over_10cm=int((np.abs(img_a - img_b) > 0.1).sum()),
            )
        else:
            rec["first_different_step"] = None  # same primitives, different collision check
        closed.append(rec)
    out["closed_loop"]["disagreements"] = closed

    # (b) replays of the same sequences
    seqs = {"closed_loop_sequences": ra.prims.copy()}
    if random_sequences:
        rng = np.random.default_rng(777)
        seqs["random_sequences"] = rng.integers(0, spec.N_PRIMS, size=ra.prims.shape)
    replay: dict[str, Any] = {}
    for name, seq in seqs.items():
        seq = np.where(seq < 0, spec.N_PRIMS // 2, seq)  # pad after a collision: fly on straight
        a = batched.rollout(thetas, seeds, forced=seq)
        b = bullet.rollout(thetas, seeds, forced=seq)
        agree = a.checks == b.checks
        dis = []
        for i, j in zip(*np.nonzero(~agree), strict=True):
            scene = sample_scene(int(seeds[i]))
            ca, cb = int(a.checks[i, j]), int(b.checks[i, j])
            first = min(c for c in (ca, cb) if c > 0)
            dis.append(
                {
                    "seed": int(seeds[i]),
                    "policy": int(j),
                    "checks_batched": ca,
                    "checks_bullet": cb,
                    "clearance_at_earlier_check_m": clearance(
                        scene, check_position(seq[i, j], first)
                    ),
                }
            )
        replay[name] = {
            "rollouts": int(agree.size),
            "share_same_collision_time": float(agree.mean()),
            "share_colliding": float((a.checks > 0).mean()),
            "disagreements": dis,
        }
    out["replay"] = replay

    # (a) depth at the same poses: every distinct decision pose of the batched closed loop
    errs, edges = [], []
    n_poses = 0
    for i, seed in enumerate(seeds):
        scene = sample_scene(int(seed))
        poses = {tuple(p) for j in range(k) for p in _positions_along(ra.prims[i, j], 0)}
        poses_arr = np.array(sorted(poses))
        img_a = render_positions(scene, poses_arr)
        bullet.load(scene)
        img_b = np.stack([bullet.render(p) for p in poses_arr])
        errs.append((img_b - img_a).ravel())  # signed: > 0 where PyBullet reads deeper
        edges.append((depth_edges(img_a) | depth_edges(img_b)).ravel())
        n_poses += len(poses_arr)
    signed = np.concatenate(errs)
    e = np.abs(signed)
    on_edge = np.concatenate(edges)
    big = e > 0.1
    out["depth"] = {
        "poses": n_poses,
        "pixels": int(e.size),
        "median_abs_err_m": float(np.median(e)),
        "p99_abs_err_m": float(np.percentile(e, 99)),
        "p999_abs_err_m": float(np.percentile(e, 99.9)),
        "max_abs_err_m": float(e.max()),
        "share_pixels_over_10cm": float(big.mean()),
        "share_of_those_on_depth_edges": float(on_edge[big].mean()) if big.any() else 1.0,
        # PyBullet draws cylinders as prisms inscribed in the true surface: deeper and thinner
        "share_of_those_bullet_deeper": float((signed[big] > 0).mean()) if big.any() else 0.0,
        "share_bullet_deeper_1mm_to_10cm": float((signed[(e > 1e-3) & ~big] > 0).mean()),
    }
    bullet.close()
    return out
