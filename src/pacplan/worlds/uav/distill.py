"""Teaching the UAV policy net from the privileged teacher (`teacher`): data and one fit.

The student sees only the depth image; the teacher labels any lattice state, so the data are
(image, soft target over the 25 primitives) pairs at states the teacher, and later the student
itself (DAgger), visit in prior-training environments. The loss (`fit`) is −log of the teacher's
expected relative preference for a primitive drawn from the softmax of the policy's own scores
(Depth Filter + net_scale · net, in metres, over a temperature): the net is trained exactly as it
will fly, residual to the filter.

The student is either policy family (`families`): the paper's net or the conv family, the same
loss and data for both, so the capacity of the two can be compared on the same labels.

Everything here is deterministic on CPU with one torch thread (fixed seeds, fixed batch order),
so a resumed distillation reproduces its weights to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pacplan.worlds.uav import dynamics as dyn
from pacplan.worlds.uav import policy as pol
from pacplan.worlds.uav import spec
from pacplan.worlds.uav.batched import BatchedSimulator
from pacplan.worlds.uav.families import PAPER_FAMILY, PolicyFamily
from pacplan.worlds.uav.scene import sample_scene
from pacplan.worlds.uav.teacher import IX_MAX, IZ_MAX, Lattice, T

COST_WEIGHT = 10.0  # one unit of rollout cost outweighs any clearance (clearance ≤ 1.7 m)


@dataclass(frozen=True)
class States:
    """Lattice states (Q,) of some environments: env seed, step, ix, iz."""

    seed: np.ndarray
    step: np.ndarray
    ix: np.ndarray
    iz: np.ndarray

    def __len__(self) -> int:
        return len(self.seed)

    @staticmethod
    def concat(parts: list[States]) -> States:
        return States(*(np.concatenate([getattr(p, f) for p in parts]).astype(np.int64)
                        for f in ("seed", "step", "ix", "iz")))

    def unique(self) -> States:
        """Each state once, in a fixed (sorted) order."""
        key = np.stack([self.seed, self.step, self.ix, self.iz], 1)
        u = np.unique(key, axis=0)
        return States(u[:, 0], u[:, 1], u[:, 2], u[:, 3])


def visited(seeds: np.ndarray, prims: np.ndarray, lattice: Lattice) -> States:
    """The decision states of rollouts that flew `prims` (n, 12) (-1 after stopping) in
    environments `seeds` (n,): every state at which a primitive was chosen."""
    out = []
    ix = np.zeros(len(seeds), np.int64)
    iz = np.zeros(len(seeds), np.int64)
    env = np.searchsorted(lattice.seeds, seeds)
    alive = np.ones(len(seeds), bool)
    for s in range(T):
        p = prims[:, s]
        here = alive & (p >= 0)
        if not here.any():
            break
        out.append(States(seeds[here], np.full(int(here.sum()), s), ix[here], iz[here]))
        pi = p[here]
        hit = lattice.first[env[here], s, ix[here] + IX_MAX, iz[here] + IZ_MAX, pi] > 0
        ix[here] += pi // 5 - 2
        iz[here] += pi % 5 - 2
        alive[np.flatnonzero(here)[hit]] = False
        alive &= here
    return States.concat(out)


def free_states(lattice: Lattice, per_env: int, rng: np.random.Generator) -> States:
    """Up to `per_env` random states per environment among those some collision-free
    primitive sequence reaches (where any policy that has not crashed may stand)."""
    e_n = len(lattice.seeds)
    reach = np.zeros((e_n, T, 2 * IX_MAX + 1, 2 * IZ_MAX + 1), bool)
    reach[:, 0, IX_MAX, IZ_MAX] = True
    for s in range(T - 1):
        free = (lattice.first[:, s] == 0) & reach[:, s][..., None]  # (E, NX, NZ, 25)
        e, i, k, p = np.nonzero(free)
        reach[e, s + 1, i + p // 5 - 2, k + p % 5 - 2] = True
    out = []
    for e in range(e_n):
        s, i, k = np.nonzero(reach[e])
        take = rng.permutation(len(s))[:per_env]
        take.sort()
        out.append(States(np.full(len(take), lattice.seeds[e]), s[take], i[take] - IX_MAX,
                          k[take] - IZ_MAX))
    return States.concat(out)


def preferences(lattice: Lattice, states: States, temperature: float) -> np.ndarray:
    """The teacher's log-preferences (Q, 25) float32, ≤ 0 with 0 at its best primitives:
    (u − max u) / temperature with u = −10·cost + clearance (m)."""
    env = np.searchsorted(lattice.seeds, states.seed)
    qc, ql = lattice.q(env, states.step, states.ix, states.iz)
    u = (-COST_WEIGHT * np.asarray(qc, np.float64) + ql) / temperature
    return (u - u.max(-1, keepdims=True)).astype(np.float32)


def render(sim: BatchedSimulator, states: States, cache: dict[tuple[int, ...], np.ndarray]
           | None = None, chunk: int = 32) -> np.ndarray:
    """Depth images (Q, 50, 50) float32 at the states, environment chunk by chunk.

    `cache` (state → image) skips states rendered before; an image does not depend on which
    other frames share its render call, so cached and fresh images are the same bits.
    """
    cache = {} if cache is None else cache
    keys = list(zip(*(a.tolist() for a in (states.seed, states.step, states.ix, states.iz)),
                    strict=True))
    todo = np.array([k not in cache for k in keys], bool)
    seeds = np.unique(states.seed[todo])
    for i in range(0, len(seeds), chunk):
        part = seeds[i : i + chunk]
        st = sim.scene_tensors([sample_scene(int(s)) for s in part])
        rows = np.flatnonzero(todo & np.isin(states.seed, part))
        env = torch.as_tensor(np.searchsorted(part, states.seed[rows]))
        pos = torch.as_tensor(dyn.grid_to_position(states.step[rows], states.ix[rows],
                                                   states.iz[rows]))
        for r, img in zip(rows, sim.render(st, env, pos).numpy(), strict=True):
            cache[keys[r]] = img
    return np.stack([cache[k] for k in keys]) if keys else np.empty((0, spec.IMG, spec.IMG),
                                                                     np.float32)


def student(family: PolicyFamily = PAPER_FAMILY, theta: np.ndarray | None = None
            ) -> torch.nn.Module:
    """The family's torch module (weights from flat `theta`, else torch's default init under the
    caller's torch seed): the paper's `ResidualNet` or the conv family's `ConvNet`."""
    from pacplan.worlds.uav.conv_policy import ConvNet

    net = pol.ResidualNet() if family.is_paper else ConvNet(int(family.width or 0))
    return net if theta is None else net.load_flat(theta)


def flat_weights(net: torch.nn.Module, family: PolicyFamily = PAPER_FAMILY) -> np.ndarray:
    """A student's flat θ (float32) in its family's layout (inverse of `student(family, θ)`)."""
    return pol.flatten_net(net, family.shapes).astype(np.float32)


def fit(theta: np.ndarray, images: np.ndarray, target: np.ndarray, *, epochs: int, lr: float,
        batch: int, temperature: float, net_scale: float, seed: int,
        family: PolicyFamily = PAPER_FAMILY) -> tuple[np.ndarray, list[float]]:
    """Behaviour cloning from `theta`: Adam on −log E[w], the teacher's relative preference
    w = exp(target) of a primitive drawn from the softmax of the policy's scores / temperature.

    It is 0 when the policy puts all its mass on the teacher's best primitives, however many
    there are, and it does not ask the policy to spread its mass as the teacher's values do
    (cross-entropy would: only the argmax is flown). Returns (θ float32, mean loss per epoch).
    """
    g = torch.Generator().manual_seed(int(seed))
    net = student(family, theta)
    x = torch.as_tensor(images)
    df = pol.FilterCells().scores(x)
    y = torch.as_tensor(target)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    losses = []
    n = x.shape[0]
    for _ in range(epochs):
        order = torch.randperm(n, generator=g)
        total = 0.0
        for i in range(0, n, batch):
            idx = order[i : i + batch]
            logits = (df[idx] + net_scale * net(x[idx, None] / spec.FAR)) / temperature
            loss = (torch.logsumexp(logits, -1) - torch.logsumexp(logits + y[idx], -1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / n)
    return flat_weights(net, family), losses


def agreement(theta: np.ndarray | None, images: np.ndarray, target: np.ndarray,
              net_scale: float, family: PolicyFamily = PAPER_FAMILY) -> float:
    """Fraction of states where the policy's choice is a primitive the teacher rates best
    (log-preference 0); θ None: the Depth Filter alone."""
    x = torch.as_tensor(images)
    scores = pol.FilterCells().scores(x)
    if theta is not None:
        net = student(family, theta)
        with torch.no_grad():
            scores = scores + net_scale * net(x[:, None] / spec.FAR)
    choice = pol.choose(scores).numpy()
    best = target >= -1e-6
    return float(best[np.arange(len(choice)), choice].mean())
