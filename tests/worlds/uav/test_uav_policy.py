"""The UAV policy: 13,943 weights, flat θ ↔ net, batched net = reference net = numpy net."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pacplan.errors import PacplanError
from pacplan.worlds.uav import policy as pol
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.policy_np import NumpyPolicy


def test_parameter_count() -> None:
    net = pol.ResidualNet()
    assert sum(p.numel() for p in net.parameters()) == 13_943 == pol.POLICY_DIM


def test_flat_theta_round_trip() -> None:
    theta = np.random.default_rng(0).normal(size=pol.POLICY_DIM).astype(np.float32)
    net = pol.ResidualNet().load_flat(theta)
    np.testing.assert_array_equal(pol.flatten_net(net), theta)
    # the first weights are conv1's, the last fc2's bias (layout is part of the stored format)
    np.testing.assert_array_equal(net.conv1.weight.detach().numpy().ravel(), theta[:32])
    np.testing.assert_array_equal(net.fc2.bias.detach().numpy(), theta[-25:])


def test_grouped_and_numpy_nets_match_reference() -> None:
    rng = np.random.default_rng(1)
    thetas = rng.normal(0, 0.3, (3, pol.POLICY_DIM)).astype(np.float32)
    images = torch.as_tensor(rng.uniform(0.5, 20, (2, 3, 50, 50)).astype(np.float32))
    grouped = pol.net_scores_grouped(images, pol.split_theta(torch.as_tensor(thetas)))
    for j in range(3):
        ref = pol.ResidualNet().load_flat(thetas[j])(images[:, j : j + 1] / spec.FAR)
        np.testing.assert_allclose(grouped[:, j].detach().numpy(), ref.detach().numpy(), atol=1e-5)
        for b in range(2):
            npy = NumpyPolicy(thetas[j]).net_scores(images[b, j].numpy())
            np.testing.assert_allclose(npy, ref[b].detach().numpy(), atol=1e-5)


def test_depth_filter_cells_and_choice() -> None:
    """A deep 5x5 cell wins; with a uniform image every cell ties and the straight primitive
    (index 12) is chosen; zero weights leave the Depth Filter alone."""
    cells = spec.filter_cells()
    assert cells.min() >= 0 and cells.max() <= spec.IMG - spec.CELL
    filt = pol.FilterCells()
    for k in (0, 7, 12, 24):
        img = np.full((50, 50), 2.0, np.float32)
        r, c = cells[k]
        img[r : r + 5, c : c + 5] = 15.0
        scores = filt.scores(torch.as_tensor(img))
        assert int(pol.choose(scores)) == k
        assert NumpyPolicy(np.zeros(pol.POLICY_DIM)).choose(img) == k
    flat = torch.full((50, 50), 20.0)
    assert int(pol.choose(filt.scores(flat))) == 12
    assert NumpyPolicy(None).choose(flat.numpy()) == 12


def test_cells_sit_where_the_end_points_project() -> None:
    """Right/up primitives look right/up in the image (row 0 is the top)."""
    cells = spec.filter_cells().reshape(5, 5, 2)  # [ix, iz]
    assert np.all(np.diff(cells[:, 2, 1]) > 0)  # larger dx -> larger column
    assert np.all(np.diff(cells[2, :, 0]) < 0)  # larger dz -> smaller row


def test_bad_weights_raise_pacplan_errors() -> None:
    """Shapes and NaN are checked by `pacplan.validation`, the same rule for every entry point."""
    good = np.zeros((2, pol.POLICY_DIM), np.float32)
    assert pol.split_theta(torch.as_tensor(good))["fc2.bias"].shape == (2, 25)
    assert pol.split_theta(torch.as_tensor(good[0]))["fc2.bias"].shape == (1, 25)
    nan = good.copy()
    nan[1, 7] = np.nan
    for bad in (good[:, :-1], good[None], nan):
        with pytest.raises(PacplanError):
            pol.split_theta(torch.as_tensor(bad))
    for bad in (good[0, :-1], good, nan[1]):
        with pytest.raises(PacplanError):
            NumpyPolicy(bad)
