"""The UAV's conv policy family (`policy: conv`): its sizes, its refusals, and every path that
evaluates it (the batched kernel, the numpy path, the world's rollouts) against the reference
module `conv_policy.ConvNet`, at the tiny width 1 (and 2) so the tests stay fast.

Tolerances: the batched kernel is the module's own float32 ops, so against the module on the
same batch it is equal to the bit, and against the module on one image within 1e-6; the numpy
path is float64, within 1e-5 of the float32 module (outputs are tanh values in [-1, 1])."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from pacplan.errors import PacplanError
from pacplan.worlds import make_world
from pacplan.worlds.uav import UAVWorld, spec
from pacplan.worlds.uav import policy as pol
from pacplan.worlds.uav.conv_policy import NET_BATCH, ConvNet, conv_scores, split_thetas
from pacplan.worlds.uav.families import CONV_WIDTHS, PAPER_FAMILY, policy_family
from pacplan.worlds.uav.policy_np import NumpyPolicy

TINY = {"policy": "conv", "policy_width": 1, "compile": False}


def _thetas(dim: int, k: int, sigma: float = 0.05, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, sigma, (k, dim)).astype(np.float32)


def _images(n: int, seed: int = 1) -> torch.Tensor:
    return torch.as_tensor(np.random.default_rng(seed).uniform(0.2, spec.FAR, (n, 50, 50)),
                           dtype=torch.float32)


def test_sizes_span_50k_to_500k_and_match_the_module() -> None:
    dims = {w: policy_family("conv", w).dim for w in CONV_WIDTHS}
    assert dims == {1: 34_380, 2: 65_471, 4: 127_845, 8: 253_361, 16: 507_465}
    for w in (1, 2, 8):
        assert sum(p.numel() for p in ConvNet(w).parameters()) == dims[w]
    assert UAVWorld(policy="conv").policy_dim() == dims[4]  # the default width
    assert UAVWorld().policy_dim() == UAVWorld(policy="paper").policy_dim() == 13_943
    assert UAVWorld().family is PAPER_FAMILY


@pytest.mark.parametrize("options,names", [
    ({"policy": "resnet"}, ["policy", "'resnet'", "paper, conv"]),
    ({"policy": "conv", "policy_width": 3}, ["policy_width", "1, 2, 4, 8, 16", "3"]),
    ({"policy": "conv", "policy_width": True}, ["policy_width", "True"]),
    ({"policy_width": 8}, ["policy_width", "policy: conv only"]),
])
def test_unknown_family_or_size_is_refused_in_one_line(options: dict, names: list[str]) -> None:
    for build in (lambda: UAVWorld(**options), lambda: UAVWorld.check_options(**options),
                  lambda: make_world("uav", **options)):
        with pytest.raises(PacplanError) as e:
            build()
        message = str(e.value)
        assert "\n" not in message and all(n in message for n in names), message


def test_weights_of_another_family_are_refused_naming_it() -> None:
    world = UAVWorld(**TINY)
    with pytest.raises(PacplanError, match=r"policy conv, policy_width 1.*\(k, 34380\).*13943"):
        world.costs(np.zeros((1, 13_943), np.float32), np.arange(1))


@pytest.mark.parametrize("width", [1, 2])
def test_batched_kernel_is_the_reference_module(width: int) -> None:
    fam = policy_family("conv", width)
    k, n_img = 3, 5
    thetas = _thetas(fam.dim, k, sigma=0.1)
    parts = split_thetas(torch.as_tensor(thetas), fam)
    images = _images(n_img)
    frame = torch.as_tensor([0, 1, 2, 3, 4, 0, 2, 4, 1, 3, 3])
    policy = torch.as_tensor([0, 0, 0, 1, 1, 2, 2, 2, 1, 0, 2])
    out = conv_scores(images, frame, policy, parts)
    nets = [ConvNet(width).load_flat(t) for t in thetas]
    with torch.no_grad():
        for r in range(len(frame)):
            one = nets[int(policy[r])](images[frame[r]][None, None] / spec.FAR)[0]
            np.testing.assert_allclose(out[r].numpy(), one.numpy(), rtol=0, atol=1e-6)
        # the module on the very batch the kernel runs (policy 1's pairs, padded): to the bit
        rows = (policy == 1).nonzero()[:, 0]
        f = frame[rows]
        batch = torch.cat([f, f[:1].expand(NET_BATCH - len(f))])
        same = nets[1](images[batch][:, None] / spec.FAR)[: len(f)]
        assert torch.equal(out[rows], same)


def test_a_pairs_score_does_not_depend_on_its_company() -> None:
    """Any subset, order or number of pairs (more than one batch of a policy too) gives each
    pair the same bits: what makes costs independent of chunks and workers."""
    fam = policy_family("conv", 1)
    parts = split_thetas(torch.as_tensor(_thetas(fam.dim, 4, sigma=0.1)), fam)
    images = _images(9)
    rng = np.random.default_rng(2)
    frame = torch.as_tensor(rng.integers(0, 9, 80))
    policy = torch.as_tensor(rng.integers(0, 4, 80))
    full = conv_scores(images, frame, policy, parts)
    for size in (1, 7, 40):
        pick = torch.as_tensor(rng.permutation(80)[:size])
        assert torch.equal(conv_scores(images, frame[pick], policy[pick], parts), full[pick])


@pytest.mark.parametrize("width", [1, 2])
def test_numpy_path_is_the_reference_module(width: int) -> None:
    fam = policy_family("conv", width)
    thetas = _thetas(fam.dim, 2, sigma=0.1, seed=width)
    images = _images(4, seed=3)
    for theta in thetas:
        net, npy = ConvNet(width).load_flat(theta), NumpyPolicy(theta, family=fam)
        with torch.no_grad():
            ref = net(images[:, None] / spec.FAR).numpy()
        for i, img in enumerate(images.numpy()):
            np.testing.assert_allclose(npy.net_scores(img), ref[i], rtol=0, atol=1e-5)
            scores = npy.filter_scores(img) + 5.0 * ref[i]
            np.testing.assert_allclose(npy.scores(img), scores, rtol=0, atol=1e-4)
    with pytest.raises(PacplanError, match=r"\(k, 34380\)"):
        NumpyPolicy(np.zeros(13_943, np.float32), family=policy_family("conv", 1))


def test_world_costs_do_not_depend_on_chunks() -> None:
    world = UAVWorld(**TINY)
    th, seeds = _thetas(world.policy_dim(), 4, sigma=0.3), np.arange(6, dtype=np.int64)
    c1 = world.costs(th, seeds)
    assert c1.shape == (6, 4) and np.all((c1 >= 0) & (c1 <= 1))
    np.testing.assert_array_equal(c1, UAVWorld(**TINY).costs(th, seeds))
    np.testing.assert_array_equal(
        c1, UAVWorld(**TINY, env_chunk=2, policy_chunk=3, render_chunk=7).costs(th, seeds))
    np.testing.assert_array_equal(c1[:, 2:3], world.costs(th[2:3], seeds))
    np.testing.assert_array_equal(c1[3:4], world.costs(th, seeds[3:4]))


def test_world_flies_the_numpy_policys_choices() -> None:
    """Every primitive the batched world flies is the one the numpy path chooses (within
    float32 rounding of a near-tie) on the batched renderer's image of that state."""
    from pacplan.worlds.uav.batched import BatchedScene

    world = UAVWorld(**TINY)
    theta = _thetas(world.policy_dim(), 1, sigma=0.3, seed=4)[0]
    npy, camera = NumpyPolicy(theta, family=world.family), BatchedScene()
    decisions = 0
    for seed in range(3):
        tr = world.trajectory(theta, seed)
        camera.load(tr.scene)
        for pos, prim in zip(tr.decisions, tr.prims, strict=True):
            scores = npy.scores(camera.render(pos))
            assert scores.max() - scores[int(prim)] < 1e-4
            decisions += 1
    assert decisions >= 3


def test_use_net_false_is_the_depth_filter_whatever_the_family() -> None:
    seeds = np.arange(4, dtype=np.int64)
    conv = UAVWorld(**{**TINY, "use_net": False})
    paper = UAVWorld(use_net=False, compile=False)
    np.testing.assert_array_equal(
        conv.costs(_thetas(conv.policy_dim(), 2, sigma=3.0), seeds),
        paper.costs(np.zeros((2, 13_943), np.float32), seeds))


def test_pickled_world_keeps_its_family() -> None:
    import pickle

    world = UAVWorld(**TINY)
    again = pickle.loads(pickle.dumps(world))
    assert again.family == world.family and again.options() == world.options()
    assert again.options()["policy"] == "conv" and again.options()["policy_width"] == 1


def test_paper_net_path_is_untouched_by_the_family_option() -> None:
    """policy: paper is the default: the same costs as a world built without the option."""
    th = np.random.default_rng(0).normal(0, 0.1, (2, 13_943)).astype(np.float32)
    seeds = np.arange(3, dtype=np.int64)
    np.testing.assert_array_equal(UAVWorld(compile=False).costs(th, seeds),
                                  UAVWorld(compile=False, policy="paper").costs(th, seeds))
    parts = pol.split_theta(torch.as_tensor(th))
    assert set(parts) == {name for name, _ in spec.NET_SHAPES}


def test_costs_are_identical_across_executors_workers_and_chunks() -> None:
    """The cost matrix of the conv family through serial and 2-process executors, with other
    task grids, is the world's own, to the bit."""
    from pacplan.pipeline.execution.executors import WorldSpec, make_executor

    world = UAVWorld(**TINY)
    th, seeds = _thetas(world.policy_dim(), 5, sigma=0.3, seed=5), np.arange(30, 37)
    direct = world.costs(th, seeds)
    spec_ = WorldSpec("uav", dict(TINY))
    with make_executor("serial", chunk_policies=2, chunk_seeds=3) as ex:
        np.testing.assert_array_equal(ex.cost_matrix(spec_, th, seeds), direct)
    with make_executor("processes", workers=2, chunk_policies=3, chunk_seeds=4) as ex:
        np.testing.assert_array_equal(ex.cost_matrix(spec_, th, seeds), direct)


def test_trajectory_figure_flies_the_conv_family(tmp_path: Path) -> None:
    """`pacplan render uav` / report figures: θ of the family's size, drawn with the numpy
    path's decisions checked against the flown ones; θ of the paper's size is refused."""
    from pacplan.worlds.uav.render import render_figure

    world = UAVWorld(**TINY)
    np.save(tmp_path / "conv.npy", _thetas(world.policy_dim(), 1, sigma=0.3, seed=6)[0])
    out = render_figure(seed=3, out=tmp_path / "fig.png", theta_path=str(tmp_path / "conv.npy"),
                        world_options=TINY)
    assert Path(out).read_bytes()[:4] == b"\x89PNG"
    np.save(tmp_path / "paper.npy", np.zeros(13_943, np.float32))
    with pytest.raises(PacplanError, match=r"expected 34380 UAV policy conv, policy_width 1 "
                                           r"weights, got shape \(13943,\)"):
        render_figure(seed=3, out=tmp_path / "fig2.png", theta_path=str(tmp_path / "paper.npy"),
                      world_options=TINY)


@pytest.mark.slow
def test_compiled_renderer_with_the_conv_net_matches_eager() -> None:
    """compile: true fuses the renderer (the conv net stays eager): costs agree but for rare
    near-ties decided by the renderer's last float bit."""
    opts = {**TINY, "policy_width": 2}
    world = UAVWorld(**opts)
    th, seeds = _thetas(world.policy_dim(), 8, sigma=0.2), np.arange(300, 330)
    eager = world.costs(th, seeds)
    fused = UAVWorld(**{**opts, "compile": True}).costs(th, seeds)
    assert (eager == fused).mean() >= 0.99
    assert abs(eager.mean() - fused.mean()) < 0.01


def _distill_cfg(**options: object) -> object:
    from pacplan.config import parse_config

    return parse_config({
        "name": "t", "world": {"name": "uav", "options": {**TINY, **options}},
        "seeds": {"prior": [0, 1000], "prior_eval": [300000, 300100],
                  "cert": [100000, 100100], "test": [200000, 200100]},
        "distill": {"envs": 6, "rounds": 1, "free_states": 4, "epochs": 1, "eval_envs": 4,
                    "workers": 1, "batch": 64},
        "es": {"iterations": 1, "envs_per_iter": 2, "pairs_per_env": 1},
        "executor": {"kind": "serial"},
    })


def test_distillation_teaches_the_conv_family_and_resumes_to_the_bit(tmp_path: Path) -> None:
    """The teacher's labels fit into the conv family (issue 52, step 2): θ of its size that the
    conv world flies, the fitted module's choices on the labelled images are the world's, and a
    run killed after round 0 resumes to the same bytes."""
    from safetensors.numpy import load_file

    from pacplan.pipeline.prior import distill as stage

    cfg = _distill_cfg()
    path = stage.distill(cfg, tmp_path / "a")
    want = path.read_bytes()
    theta = load_file(str(path))["theta"]
    assert theta.shape == (policy_family("conv", 1).dim,) and np.isfinite(theta).all()
    record = (tmp_path / "a" / stage.DIR / stage.RECORD).read_text()
    assert '"eval_envs": 4' in record
    out = tmp_path / "a" / stage.DIR
    for name in ("round-1.safetensors", "states-1.npy", stage.THETA, stage.RECORD):
        (out / name).unlink()
    assert stage.distill(cfg, tmp_path / "a").read_bytes() == want
    costs = UAVWorld(**TINY).costs(theta[None], np.arange(300, 304))
    assert costs.shape == (4, 1) and ((costs >= 0) & (costs <= 1)).all()


def test_distillation_of_another_family_is_refused_in_a_folder_of_this_one(tmp_path: Path
                                                                           ) -> None:
    from pacplan.pipeline.prior import distill as stage

    stage._stamp(tmp_path / "d", stage._inputs(_distill_cfg()), "--out")
    with pytest.raises(PacplanError, match=r"other settings \(changed: policy\)") as e:
        stage._stamp(tmp_path / "d", stage._inputs(_distill_cfg(policy_width=2)), "--out")
    assert "\n" not in str(e.value) and "use a new --out directory" in str(e.value)
    paper = _distill_cfg(policy="paper", policy_width=None)
    assert "policy" not in stage._inputs(paper)  # the paper's stamps are those made before


def test_distillation_refuses_an_unknown_width_before_any_work(tmp_path: Path) -> None:
    from pacplan.pipeline.prior import distill as stage

    with pytest.raises(PacplanError, match="policy_width must be one of 1, 2, 4, 8, 16") as e:
        stage.distill(_distill_cfg(policy_width=3), tmp_path / "run")
    assert "\n" not in str(e.value) and not (tmp_path / "run").exists()
