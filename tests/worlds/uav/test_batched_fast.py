"""The compiled path's kernels (`uav.compiled`) against the reference kernels, bit for bit.

`BatchedSimulator(compile=True)` used to compile `raycast.render_kernel` and
`policy.conv_features`; it now compiles `compiled.*`, which must give the same float32 values to
the bit (results of shipped presets are pinned). The compile tests are slow (inductor builds);
the layout tests run eagerly.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from uav_helpers import scene_with

from pacplan.worlds.uav import compiled as fast
from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import policy as pol
from pacplan.worlds.uav import raycast, spec
from pacplan.worlds.uav.batched import BatchedSimulator
from pacplan.worlds.uav.scene import sample_scene


def _edge_scene() -> list:
    """Cylinders at the awkward places: just behind / beside the camera, along a ray, touching
    the camera's y, nearly parallel to the view, tiny and far."""
    cam_y = spec.CAM_OFFSET[1]
    return [
        scene_with([
            ((0.0, cam_y - 0.3, 2.0), (0.0, 0.0, 1.0), 0.3),  # whole extent just behind
            ((0.5, cam_y + 1e-3, 2.0), (1.0, 0.0, 0.0), 0.05),  # grazing the camera plane
            ((0.0, 3.0, 1.9), (0.0, 1.0, -0.08), 0.2),  # axis along the view direction
            ((-3.0, 1.0, 2.0), (0.3, 0.1, 1.0), 0.3),  # beside, at the image edge
            ((2.0, 13.9, 0.0), (0.0, 0.0, 1.0), 0.05),  # thin and far
        ])
    ]


def _frames(sim: BatchedSimulator, rng: np.random.Generator, grid: bool
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """render_chunk (env, position) pairs: grid states over all steps, or anywhere in the
    tunnel (including behind the start and past the obstacles)."""
    f = sim.render_chunk
    env = torch.as_tensor(rng.integers(0, sim.env_chunk, f))
    if grid:
        pos = dyn.grid_to_position(rng.integers(0, 12, f), rng.integers(-9, 10, f),
                                   rng.integers(-3, 4, f))
    else:
        pos = np.stack([rng.uniform(-4.7, 4.7, f), rng.uniform(-3, 18, f),
                        rng.uniform(0.3, 3.7, f)], axis=1)
    return env, torch.as_tensor(pos)


def _render_args(sim: BatchedSimulator, st: raycast.SceneTensors, env: torch.Tensor,
                 pos: torch.Tensor) -> tuple[torch.Tensor, ...]:
    cam = pos + sim.cam_offset
    w = (cam[:, None, :] - st.centres[env]).float()
    return (st.da, st.a2, env, w, st.axes[env].float(), st.radii[env].float(), cam.float())


@pytest.mark.slow
def test_compiled_render_is_bit_identical_to_the_reference() -> None:
    sim = BatchedSimulator(compile=True, env_chunk=8)
    ref = torch.compile(raycast.render_kernel, dynamic=False)
    new = torch.compile(fast.render_kernel, dynamic=False)
    rng = np.random.default_rng(0)
    tables = [[sample_scene(s) for s in range(i, i + 8)] for i in range(0, 48, 8)]
    tables.append(_edge_scene() * 8)
    frames = 0
    for scenes in tables:
        st = sim.scene_tensors(scenes)
        for grid in (True, False):
            env, pos = _frames(sim, rng, grid)
            args = _render_args(sim, st, env, pos)
            a = ref(sim.rays, *args)
            b = new(sim.rays_t, *args)
            assert torch.equal(a, b)
            frames += env.shape[0]
    assert frames == 14 * sim.render_chunk


@pytest.mark.slow
def test_culled_renderer_is_bit_identical_to_the_compiled_reference() -> None:
    """The simulator's compiled renderer (culling, slots of cylinders per column band, planes)
    gives the compiled reference kernel's depth and net input to the bit, with the scene tables
    it makes for a chunk of seeds and with tables made elsewhere (`scene_tensors`)."""
    sim = BatchedSimulator(compile=True, env_chunk=8)
    ref = torch.compile(raycast.render_kernel, dynamic=False)
    phases = torch.compile(fast.phases, dynamic=False)  # eager divides by 1/FAR's product
    rng = np.random.default_rng(3)
    frames = 0
    for first in range(100, 148, 8):
        seeds = np.arange(first, first + 8)
        st_ref = sim.scene_tensors([sample_scene(int(s)) for s in seeds])
        for st in (sim._chunk_scenes(seeds), st_ref):
            for grid in (True, False):
                env, pos = _frames(sim, rng, grid)
                want = ref(sim.rays, *_render_args(sim, st_ref, env, pos))
                images, xp = sim._render(st, env, pos)
                assert torch.equal(images.reshape(len(env), -1), want)
                assert torch.equal(xp[: len(env)], phases(want))
                frames += len(env)
    edge = sim.scene_tensors(_edge_scene() * 8)
    for grid in (True, False):
        env, pos = _frames(sim, rng, grid)
        images, _ = sim._render(edge, env, pos)
        assert torch.equal(images.reshape(len(env), -1),
                           ref(sim.rays, *_render_args(sim, edge, env, pos)))
    assert frames == 24 * sim.render_chunk


@pytest.mark.slow
def test_compiled_net_input_and_convs_are_bit_identical_to_the_reference() -> None:
    ref = torch.compile(pol.conv_features, dynamic=False)
    phases = torch.compile(fast.phases, dynamic=False)
    conv1 = torch.compile(fast.conv1, dynamic=False)
    conv2 = torch.compile(fast.conv2, dynamic=False)
    gen = torch.Generator().manual_seed(0)
    r, u = 256, 64
    for scale in (0.01, 0.1, 1.0, 4.0):
        depth = (torch.rand(u, spec.IMG * spec.IMG, generator=gen) * 25).clamp(max=spec.FAR)
        g = torch.randint(0, u, (r,), generator=gen)
        w1 = torch.randn(r, 2, 4, 4, generator=gen) * scale
        b1 = torch.randn(r, 2, generator=gen) * scale
        w2 = torch.randn(r, 2, 2, 2, generator=gen) * scale
        b2 = torch.randn(r, generator=gen) * scale
        images = depth.reshape(u, spec.IMG, spec.IMG)
        a = ref(images[g], w1, b1, w2, b2)
        b = conv2(conv1(phases(depth)[g], w1, b1), w2, b2)
        assert torch.equal(a, b)


def test_phases_is_the_polyphase_split_of_the_normalised_image() -> None:
    depth = torch.rand(3, spec.IMG * spec.IMG) * spec.FAR
    x = fast.phases(depth)
    img = depth.reshape(3, spec.IMG, spec.IMG) / spec.FAR
    for a in range(2):
        for b in range(2):
            torch.testing.assert_close(x[:, a, b], img[:, a::2, b::2], rtol=1e-6, atol=0)


def test_polyphase_convs_compute_the_reference_features() -> None:
    """Eager: layouts and tap order agree with `policy.conv_features` (to rounding; the
    compiled test pins the bits)."""
    gen = torch.Generator().manual_seed(1)
    r = 5
    depth = torch.rand(r, spec.IMG * spec.IMG, generator=gen) * spec.FAR
    w1, b1 = torch.randn(r, 2, 4, 4, generator=gen), torch.randn(r, 2, generator=gen)
    w2, b2 = torch.randn(r, 2, 2, 2, generator=gen), torch.randn(r, generator=gen)
    a = pol.conv_features(depth.reshape(r, spec.IMG, spec.IMG), w1, b1, w2, b2)
    b = fast.conv2(fast.conv1(fast.phases(depth), w1, b1), w2, b2)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_unrolled_render_agrees_with_the_reference_eagerly() -> None:
    sim = BatchedSimulator(compile=False, env_chunk=4)
    st = sim.scene_tensors([sample_scene(s) for s in range(4)])
    env, pos = _frames(sim, np.random.default_rng(2), grid=True)
    args = _render_args(sim, st, env, pos)
    a = raycast.render_kernel(sim.rays, *args)
    b = fast.render_kernel(sim.rays_t, *args)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_a_compiler_that_fails_is_not_tried_again_in_the_process(monkeypatch) -> None:
    """A compiled function that fails warns once, gives the eager result, and a later
    simulator on the same device does not call it again (each try ran the C++ compiler)."""
    import pacplan.worlds.uav.batched as batched

    monkeypatch.setattr(batched, "_FAILED_TO_COMPILE", set())
    calls: list[int] = []

    def broken(*_args):
        calls.append(1)
        raise RuntimeError("no working C++ compiler")

    def eager(x):
        return x + 1

    x = torch.zeros(3)
    first, second = BatchedSimulator(compile=False), BatchedSimulator(compile=False)
    first.finish = second.finish = broken
    with pytest.warns(RuntimeWarning, match="torch.compile failed"):
        assert torch.equal(first._compiled_or_eager("finish", eager, "ray caster", x), x + 1)
    assert torch.equal(second._compiled_or_eager("finish", eager, "ray caster", x), x + 1)
    assert torch.equal(first._compiled_or_eager("finish", eager, "ray caster", x), x + 1)
    assert len(calls) == 1
