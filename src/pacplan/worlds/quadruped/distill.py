"""Teaching the 944-weight quadruped net from the look-ahead teacher: labelled states, one fit.

The student sees a depth image and 22 proprioceptive values; the teacher (`teacher`) scores its
12 candidate gaits at any simulator state by looking ahead. The data are therefore (image,
proprioception, the candidates' scores) at the decision states of episodes in prior-training
terrains: the teacher's own episodes first, then the student's (DAgger: the student walks, the
teacher scores every state it reaches, the student's gait is run).

The fit maximises the expected look-ahead score of the gait the net outputs (`fit`), not the
squared distance to the teacher's pick. The teacher's pick is exact closed-loop re-planning:
from what the student sees, the same-looking states are won by different risky gaits, and the
mean of the winners is a gait that falls. Measured on 96 prior terrains and 100 held-out ones
(2026-11-27): regression to the teacher's (softened) picks walked 0.350, and 0.407 after a
DAgger round, against 0.324 for the constant gait it started from; the expected-score fit
walked 0.301 from the same data. Each candidate's mean score over the states tells the net
which gaits are safe where it cannot tell states apart (the constant gait has the best mean:
it falls least), and the states it can tell apart move it away from there.

Inputs are standardised inside the fit and the scales folded back into the weights, so the net
that comes out is the plain 944-weight net `policy.policy_output` evaluates. Everything is
deterministic on CPU with one torch thread (fixed seeds, fixed batch order), so a resumed
distillation reproduces its weights to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import (
    CHANNELS,
    IMAGE_SIZE,
    KERNEL,
    N_FEATURES,
    N_OUT,
    N_PROPRIO,
    POLICY_DIM,
    policy_action,
)
from pacplan.worlds.quadruped.teacher import QuadrupedTeacher, TeacherConfig

OFF_GRID_M = 10.0  # metres per kernel width² beyond the candidates' box: a fall's price
OFF_GRID_MARGIN = 0.125
"""Half the candidates' spacing in η: within it the edge candidate is still the nearest, and the
sigmoid may overshoot an edge a little, so a steep switch between edge gaits stays possible."""
ETA_FLOOR = 0.0025  # targets stay this far inside (0, 1): a sigmoid never reaches its ends


@dataclass(frozen=True)
class Labelled:
    """Decision states of some episodes and the teacher's scores there (k rows)."""

    seed: np.ndarray  # (k,) int64 terrain seed
    primitive: np.ndarray  # (k,) int64 primitives already run
    depth: np.ndarray  # (k, 50, 50) float32 metres
    proprio: np.ndarray  # (k, 22) float32
    scores: np.ndarray  # (k, C) float64 metres

    def __len__(self) -> int:
        return len(self.seed)

    @staticmethod
    def concat(parts: list[Labelled]) -> Labelled:
        fields = ("seed", "primitive", "depth", "proprio", "scores")
        return Labelled(*(np.concatenate([getattr(p, f) for p in parts]) for f in fields))

    def arrays(self) -> dict[str, np.ndarray]:
        return {"seed": self.seed, "primitive": self.primitive, "depth": self.depth,
                "proprio": self.proprio, "scores": self.scores}


def candidate_etas(config: TeacherConfig) -> np.ndarray:
    """(C, 4) the policy outputs η that `GaitParams.from_policy_output` maps to each of the
    teacher's candidates (inside [floor, 1 − floor])."""
    rows = np.array([g.policy_output() for g in config.candidates], dtype=np.float64)
    return np.clip(rows, ETA_FLOOR, 1.0 - ETA_FLOOR)


def label_episode(world: Any, teacher: QuadrupedTeacher, seed: int,
                  student: np.ndarray | None = None) -> tuple[Labelled, float]:
    """One episode on terrain `seed` with every decision state scored by the teacher, and the
    episode's cost. `student` None: the teacher's own gaits are run; else the student's."""
    sim = world.sim
    decisions: list[Any] = []
    ask_teacher = teacher.controller(sim, decisions)
    depths: list[np.ndarray] = []
    proprios: list[np.ndarray] = []

    def control(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
        gait = ask_teacher(depth, proprio)
        depths.append(np.array(depth, dtype=np.float32))
        proprios.append(np.array(proprio, dtype=np.float32))
        if student is None:
            return gait
        return GaitParams.from_policy_output(policy_action(student, depth, proprio))

    result = world.run(control, int(seed))  # the variant's own episode and cost rule
    k = len(decisions)
    data = Labelled(
        seed=np.full(k, int(seed), dtype=np.int64),
        primitive=np.array([d.primitive for d in decisions], dtype=np.int64),
        depth=np.stack(depths).reshape(k, IMAGE_SIZE, IMAGE_SIZE),
        proprio=np.stack(proprios).reshape(k, N_PROPRIO),
        scores=np.stack([d.scores for d in decisions]).astype(np.float64),
    )
    return data, float(result.cost)


def fit(theta: np.ndarray, data: Labelled, scores: np.ndarray, etas: np.ndarray, *,
        kernel: float, epochs: int, lr: float, batch: int, seed: int
        ) -> tuple[np.ndarray, list[float]]:
    """Fit the net (started at `theta`), Adam, minibatches in a fixed order; returns the weights
    (float64, the policy's layout) and each epoch's mean loss.

    `scores` (k, C) are the candidates' look-ahead scores (metres) and `etas` (C, 4) their
    policy outputs; the loss is minus the expected score of the net's η, each candidate
    weighted by softmax(−‖η − η_c‖² / kernel): the net is pulled towards the gaits that score
    well on average over the states it cannot tell apart. Beyond the candidates' box the
    nearest edge candidate's weight still grows outwards, and Adam follows that tiny but steady
    gradient far off the grid, to gaits the teacher never scored (measured: a refit on the states
    of 360 terrains put 73 % of held-out η below a1 = 0.575, and walked 0.884); so a squared
    distance beyond the box widened by `OFF_GRID_MARGIN` costs `OFF_GRID_M` metres per kernel
    width.

    The depth image and each proprioceptive value are standardised over `data` first (their
    scales differ by orders of magnitude: metres, radians, rad/s), and the scaling is folded
    into the returned weights exactly.
    """
    import torch

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(int(seed))
    d_mu, d_sd, p_mu, p_sd = input_scales(data.depth, data.proprio)
    conv_w, conv_b, lin_w, lin_b = to_standardised(theta, d_mu, d_sd, p_mu, p_sd)
    params = [torch.tensor(a, dtype=torch.float64, requires_grad=True)
              for a in (conv_w, conv_b, lin_w, lin_b)]
    depth = torch.tensor((data.depth.astype(np.float64) - d_mu) / d_sd).unsqueeze(1)
    prop = torch.tensor((data.proprio.astype(np.float64) - p_mu) / p_sd)
    y = torch.tensor(scores, dtype=torch.float64)
    cand = torch.tensor(etas, dtype=torch.float64)
    lo, hi = cand.min(dim=0).values - OFF_GRID_MARGIN, cand.max(dim=0).values + OFF_GRID_MARGIN
    opt = torch.optim.Adam(params, lr=lr)
    n = len(data)
    losses: list[float] = []
    for _ in range(epochs):
        order = torch.randperm(n, generator=gen)
        total = 0.0
        for start in range(0, n, batch):
            idx = order[start : start + batch]
            eta = net_output(params, depth[idx], prop[idx])
            near = torch.softmax(-((eta[:, None, :] - cand[None]) ** 2).sum(-1) / kernel, 1)
            off = (lo - eta).clamp_min(0) + (eta - hi).clamp_min(0)  # beyond the grid's box
            loss = (-(near * y[idx]).sum(dim=1).mean()
                    + OFF_GRID_M * (off ** 2).sum(dim=1).mean() / kernel)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / max(n, 1))
    out = [p.detach().numpy() for p in params]
    return from_standardised(*out, d_mu, d_sd, p_mu, p_sd), losses


def input_scales(depth: np.ndarray, proprio: np.ndarray
                 ) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Mean and spread of the depth images (one pair) and of each proprioceptive value: a fit
    standardises its inputs with them (a value that never varies keeps spread 1)."""
    d_sd = float(depth.std()) or 1.0
    p_sd = proprio.astype(np.float64).std(axis=0)
    p_sd[p_sd < 1e-6] = 1.0
    return float(depth.mean()), d_sd, proprio.astype(np.float64).mean(axis=0), p_sd


def agreement(theta: np.ndarray, data: Labelled, teacher_etas: np.ndarray) -> float:
    """Fraction of states where the candidate nearest the net's η (in η) is one the teacher
    scores best (within 1 mm): how often the student would pick a gait the teacher would."""
    from pacplan.worlds.quadruped.policy import policy_output

    if len(data) == 0:
        return float("nan")
    hits = 0
    for i in range(len(data)):
        eta = policy_output(theta, data.depth[i], data.proprio[i])
        near = int(np.argmin(((teacher_etas - eta) ** 2).sum(axis=1)))
        hits += data.scores[i, near] >= data.scores[i].max() - 1e-3
    return hits / len(data)


def net_output(params: list[Any], depth: Any, prop: Any) -> Any:
    import torch

    conv_w, conv_b, lin_w, lin_b = params
    feats = torch.tanh(torch.nn.functional.conv2d(depth, conv_w, conv_b, stride=KERNEL))
    x = torch.cat([feats.flatten(1), prop], dim=1)
    return torch.sigmoid(x @ lin_w.T + lin_b)


def _split(theta: np.ndarray) -> tuple[np.ndarray, ...]:
    from pacplan.worlds.quadruped.policy import unpack

    w = unpack(theta)
    return w["conv_w"].copy(), w["conv_b"].copy(), w["lin_w"].copy(), w["lin_b"].copy()


def to_standardised(theta: np.ndarray, d_mu: float, d_sd: float, p_mu: np.ndarray,
                     p_sd: np.ndarray) -> tuple[np.ndarray, ...]:
    """The same net on standardised inputs: conv on (d − μ)/σ, linear on (p − μ)/σ."""
    conv_w, conv_b, lin_w, lin_b = _split(theta)
    conv_b = conv_b + conv_w.sum(axis=(1, 2, 3)) * d_mu
    conv_w = conv_w * d_sd
    wp = lin_w[:, N_FEATURES:]
    lin_b = lin_b + wp @ p_mu
    lin_w = lin_w.copy()
    lin_w[:, N_FEATURES:] = wp * p_sd
    return conv_w, conv_b, lin_w, lin_b


def from_standardised(conv_w: np.ndarray, conv_b: np.ndarray, lin_w: np.ndarray,
                       lin_b: np.ndarray, d_mu: float, d_sd: float, p_mu: np.ndarray,
                       p_sd: np.ndarray) -> np.ndarray:
    """Fold the standardisation back: the plain net on raw inputs, flat (944,) float64."""
    cw = conv_w / d_sd
    cb = conv_b - cw.sum(axis=(1, 2, 3)) * d_mu
    lw = lin_w.copy()
    lw[:, N_FEATURES:] = lin_w[:, N_FEATURES:] / p_sd
    lb = lin_b - lw[:, N_FEATURES:] @ p_mu
    flat = np.concatenate([cw.reshape(-1), cb, lw.reshape(-1), lb]).astype(np.float64)
    assert flat.size == POLICY_DIM and cw.shape == (CHANNELS, 1, KERNEL, KERNEL)
    assert lw.shape == (N_OUT, N_FEATURES + N_PROPRIO)
    return flat
