"""Cross-validation of the batched simulator against the PyBullet oracle.

Three checks on the same seeds and policies (docs/design.md §4.5):
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

from dataclasses import dataclass
from typing import Any

import numpy as np

from pacplan.worlds.uav import dynamics, spec
from pacplan.worlds.uav.batched import BatchedScene, BatchedSimulator
from pacplan.worlds.uav.bullet import BulletSimulator
from pacplan.worlds.uav.policy_np import NumpyPolicy
from pacplan.worlds.uav.results import RolloutResult
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


def decision_positions(seq: np.ndarray) -> np.ndarray:
    """(S, 3) positions where each primitive of a flown sequence (-1 = none) was chosen."""
    return dynamics.flight(seq)[0]


def check_position(seq: np.ndarray, check: int) -> np.ndarray:
    """Robot position at global check index `check` (1..240) along a primitive sequence."""
    return dynamics.flight(seq, check)[1][-1]


@dataclass
class _Sims:
    """The simulators under comparison, built once per run."""

    batched: BatchedSimulator  # the rollouts, compiled or not as asked
    eager: BatchedScene  # images at single poses, eager as the figures and the Gym env use
    bullet: BulletSimulator


def run(
    seeds: np.ndarray,
    thetas: np.ndarray,
    net_scale: float = spec.DEFAULT_NET_SCALE,
    compile: bool = False,
    random_sequences: bool = True,
) -> dict[str, Any]:
    """All three checks; returns figures and the list of every disagreement."""
    seeds = np.asarray(seeds, dtype=np.int64)
    sims = _Sims(BatchedSimulator(compile=compile), BatchedScene(), BulletSimulator())
    out: dict[str, Any] = {"seeds": len(seeds), "policies": len(thetas), "net_scale": net_scale}
    ra = sims.batched.rollout(thetas, seeds, net_scale=net_scale)
    rb = sims.bullet.rollout(thetas, seeds, net_scale=net_scale)
    out["closed_loop"] = _closed_loop(sims, seeds, thetas, net_scale, ra, rb)
    out["replay"] = _replays(sims, seeds, thetas, ra.prims, random_sequences)
    out["depth"] = _depth(sims, seeds, ra.prims)
    sims.bullet.close()
    return out


def _closed_loop(sims: _Sims, seeds: np.ndarray, thetas: np.ndarray, net_scale: float,
                 ra: RolloutResult, rb: RolloutResult) -> dict[str, Any]:
    """(c) closed-loop costs of both simulators, and why each differing flight differs."""
    same = ra.checks == rb.checks
    out: dict[str, Any] = {
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
        differ = np.nonzero(ra.prims[i, j] != rb.prims[i, j])[0]
        rec: dict[str, Any] = {
            "seed": int(seeds[i]),
            "policy": int(j),
            "checks_batched": int(ra.checks[i, j]),
            "checks_bullet": int(rb.checks[i, j]),
        }
        if len(differ):
            scene = sample_scene(int(seeds[i]))
            rec.update(_split(sims, scene, policies[j], ra.prims[i, j], rb.prims[i, j], differ[0]))
        else:
            rec["first_different_step"] = None  # same primitives, different collision check
        closed.append(rec)
    out["disagreements"] = closed
    return out


def _split(sims: _Sims, scene: Scene, policy: NumpyPolicy, seq_a: np.ndarray,
           seq_b: np.ndarray, step: int) -> dict[str, Any]:
    """Where two closed-loop flights part: the choices, their score margin, the images there."""
    step = int(step)
    pos = decision_positions(seq_a)[step]
    sims.eager.load(scene)
    img_a = sims.eager.render(pos)
    sims.bullet.load(scene)
    img_b = sims.bullet.render(pos)
    s = policy.scores(img_a)
    pa, pb = int(seq_a[step]), int(seq_b[step])
    return {
        "first_different_step": step,
        "prim_batched": pa,
        "prim_bullet": pb,
        "score_margin_m": float(s[pa] - s[pb]),
        # the same policy code on each simulator's own image reproduces each choice, so the
        # split comes from the images alone
        "choices_follow_images": bool(policy.choose(img_a) == pa and policy.choose(img_b) == pb),
        "image_max_abs_diff_m": float(np.abs(img_a - img_b).max()),
        "image_pixels_over_10cm": int((np.abs(img_a - img_b) > 0.1).sum()),
    }


def _replays(sims: _Sims, seeds: np.ndarray, thetas: np.ndarray, closed_prims: np.ndarray,
             random_sequences: bool) -> dict[str, Any]:
    """(b) collision times when both simulators replay the same primitive sequences."""
    seqs = {"closed_loop_sequences": closed_prims.copy()}
    if random_sequences:
        rng = np.random.default_rng(777)
        seqs["random_sequences"] = rng.integers(0, spec.N_PRIMS, size=closed_prims.shape)
    replay: dict[str, Any] = {}
    for name, seq in seqs.items():
        seq = np.where(seq < 0, spec.N_PRIMS // 2, seq)  # pad after a collision: fly on straight
        a = sims.batched.rollout(thetas, seeds, forced=seq)
        b = sims.bullet.rollout(thetas, seeds, forced=seq)
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
    return replay


def _depth(sims: _Sims, seeds: np.ndarray, closed_prims: np.ndarray) -> dict[str, Any]:
    """(a) depth at the same poses: every distinct decision pose of the batched closed loop."""
    errs, edges = [], []
    n_poses = 0
    for i, seed in enumerate(seeds):
        scene = sample_scene(int(seed))
        poses = {tuple(p) for seq in closed_prims[i] for p in decision_positions(seq)}
        poses_arr = np.array(sorted(poses))
        sims.eager.load(scene)
        img_a = sims.eager.render(poses_arr)
        sims.bullet.load(scene)
        img_b = np.stack([sims.bullet.render(p) for p in poses_arr])
        errs.append((img_b - img_a).ravel())  # signed: > 0 where PyBullet reads deeper
        edges.append((depth_edges(img_a) | depth_edges(img_b)).ravel())
        n_poses += len(poses_arr)
    signed = np.concatenate(errs)
    e = np.abs(signed)
    on_edge = np.concatenate(edges)
    big = e > 0.1
    return {
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
