"""Culling (`uav.cull`) never drops a cylinder that matters: the oracle is the full kernels.

For each cylinder alone, the eager reference renderer and sweep say where it changes a depth
or a hit; `cull.visible` / `cull.touchable` must keep every such pair. The compiled renderer's
bits against the uncompiled reference are pinned in test_batched_fast.py (slow).
"""

from __future__ import annotations

import numpy as np
import torch
from uav_helpers import scene_with

from pacplan.worlds.uav import cull, raycast, spec
from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav.batched import BatchedSimulator
from pacplan.worlds.uav.scene import Scene, sample_scene

BANDS = 5


def _alone(scene: Scene, k: int) -> Scene:
    """Scene with cylinder k only."""
    one = slice(k, k + 1)
    return Scene(scene.seed, scene.centres[one], scene.axes[one], scene.radii[one],
                 scene.quats[one], 1)


def _edge_scene() -> Scene:
    cam_y = spec.CAM_OFFSET[1]
    return scene_with([
        ((0.0, cam_y - 0.3, 2.0), (0.0, 0.0, 1.0), 0.3),  # just behind the start camera
        ((0.5, cam_y + 1e-3, 2.0), (1.0, 0.0, 0.0), 0.05),  # grazing the camera plane
        ((0.0, 3.0, 1.9), (0.0, 1.0, -0.08), 0.2),  # axis along the view direction
        ((-3.0, 1.0, 2.0), (0.3, 0.1, 1.0), 0.3),  # beside, at the image edge
        ((2.0, 13.9, 0.0), (0.0, 0.0, 1.0), 0.05),  # thin and far
        ((5.4, 4.0, 2.0), (0.0, 0.0, 1.0), 0.25),  # just outside the right wall
        ((0.0, 6.0, -0.35), (1.0, 0.0, 0.0), 0.3),  # lying just under the floor
    ])


def _cameras(rng: np.random.Generator, n: int) -> torch.Tensor:
    """Grid states of every step and positions anywhere in the tunnel, as camera positions."""
    grid = dyn.grid_to_position(rng.integers(0, 12, n), rng.integers(-9, 10, n),
                                rng.integers(-3, 4, n))
    free = np.stack([rng.uniform(-4.7, 4.7, n), rng.uniform(-3, 18, n),
                     rng.uniform(0.3, 3.7, n)], axis=1)
    return torch.as_tensor(np.concatenate([grid, free])) + torch.as_tensor(spec.CAM_OFFSET)


def _render_one(sim: BatchedSimulator, scene: Scene, cam: torch.Tensor) -> torch.Tensor:
    st = sim.scene_tensors([scene])
    env = torch.zeros(cam.shape[0], dtype=torch.long)
    w = (cam[:, None, :] - st.centres[env]).float()
    return raycast.render_kernel(sim.rays, st.da, st.a2, env, w, st.axes[env].float(),
                                 st.radii[env].float(), cam.float())


def test_visible_keeps_every_cylinder_that_changes_a_pixel() -> None:
    sim = BatchedSimulator(compile=False)
    rng = np.random.default_rng(0)
    cam = _cameras(rng, 48)
    empty = _render_one(sim, scene_with([]), cam)
    columns = cull.band_columns(BANDS)
    kept = matters = total = 0
    for scene in [sample_scene(s) for s in range(4)] + [_edge_scene()]:
        n = len(scene.radii)
        vis = cull.visible(cam, *(torch.as_tensor(v)[None].expand(cam.shape[0], *v.shape)
                                  for v in (scene.centres, scene.axes, scene.radii)), BANDS)
        assert vis.shape == (cam.shape[0], BANDS, n)
        for k in range(n):
            changed = (_render_one(sim, _alone(scene, k), cam) != empty).reshape(
                -1, spec.IMG, spec.IMG)
            for b, cols in enumerate(columns):
                seen = changed[:, :, cols].flatten(1).any(1)
                assert not (seen & ~vis[:, b, k]).any(), (scene.seed, k, b)
                matters += int(seen.sum())
        kept += int(vis.sum())
        total += vis.numel()
    # not vacuous: cylinders are seen, and many (frame, band, cylinder) triples are culled
    assert matters > 500
    assert kept < 0.6 * total


def test_a_cylinder_behind_the_camera_or_outside_the_walls_is_culled() -> None:
    scene = _edge_scene()
    cam = torch.tensor([[0.0, 8.0, 2.0]], dtype=torch.float64)
    vis = cull.visible(cam, *(torch.as_tensor(v)[None] for v in
                              (scene.centres, scene.axes, scene.radii)))[0, 0]
    assert not vis[0]  # 8 m behind
    assert vis[4]  # ahead, in view
    assert not vis[5]  # behind the right wall: only its depth counts there
    assert not vis[6]  # under the floor


def test_touchable_keeps_every_cylinder_that_a_check_touches() -> None:
    rng = np.random.default_rng(1)
    disp_all = torch.tensor(dyn.CHECK_DISP)
    q = 400
    hits = kept = total = 0
    for scene in [sample_scene(s) for s in range(10, 16)] + [_edge_scene()]:
        pos = torch.as_tensor(dyn.grid_to_position(rng.integers(0, 12, q),
                                                   rng.integers(-9, 10, q),
                                                   rng.integers(-3, 4, q)))
        disp = disp_all[torch.as_tensor(rng.integers(0, 25, q))]
        n = len(scene.radii)
        touch = cull.touchable(pos + disp.amin(1), pos + disp.amax(1),
                               *(torch.as_tensor(v)[None].expand(q, *v.shape)
                                 for v in (scene.centres, scene.axes, scene.radii)))
        for k in range(n):
            st = raycast.SceneTensors([_alone(scene, k)], torch.zeros(1, 3), torch.float32)
            first = raycast.sweep_kernel(st, torch.zeros(q, dtype=torch.long), pos, disp)
            walls = raycast.sweep_kernel(raycast.SceneTensors([_alone(scene_with([]), 0)],
                                                              torch.zeros(1, 3), torch.float32),
                                         torch.zeros(q, dtype=torch.long), pos, disp)
            by_cylinder = first != walls  # this cylinder moves the first colliding check
            assert not (by_cylinder & ~touch[:, k]).any(), (scene.seed, k)
            hits += int(by_cylinder.sum())
        kept += int(touch.sum())
        total += touch.numel()
    assert hits > 50
    assert kept < 0.2 * total


def test_culled_sweep_equals_the_full_sweep() -> None:
    """`sweep_kernel` with the touchable pairs only: the same first colliding checks."""
    rng = np.random.default_rng(2)
    scenes = [sample_scene(s) for s in range(20, 28)]
    st = raycast.SceneTensors(scenes, torch.zeros(1, 3), torch.float32)
    q = 3000
    env = torch.as_tensor(rng.integers(0, len(scenes), q))
    pos = torch.as_tensor(dyn.grid_to_position(rng.integers(0, 12, q), rng.integers(-9, 10, q),
                                               rng.integers(-3, 4, q)))
    disp = torch.tensor(dyn.CHECK_DISP)[torch.as_tensor(rng.integers(0, 25, q))]
    touch = cull.touchable(pos + disp.amin(1), pos + disp.amax(1), st.centres[env],
                           st.axes[env], st.radii[env])
    full = raycast.sweep_kernel(st, env, pos, disp)
    culled = raycast.sweep_kernel(st, env, pos, disp, touch.nonzero(as_tuple=True))
    assert torch.equal(full, culled)
    assert int((full > 0).sum()) > 100
