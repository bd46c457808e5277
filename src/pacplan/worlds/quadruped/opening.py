"""Teaching the paper-code net to open a steep first tent with a climbing gait.

Why: in the paper's experiment as its code ran it (`variant: paper-code`, PyBullet), a prior
trained on the MuJoCo twin walks in place in front of a first tent of 20° or more until time
runs out, and that stratum (about 14 % of terrains) is where it loses to the paper's prior.
Full extension climbs it in both engines; run for the first 1.5 s on every terrain it costs the
ordinary ones dearly, so the opening must follow what the robot senses — and its first
observation does tell a steep first tent apart (a logistic fit on the first depth image, or on
the 22 proprioceptive values, separates them with AUC 1.000: benchmarks/quadruped_steep_visible.py).

The teacher is a privileged rule, not a search: on a terrain of the world's `steep` stratum
(known from the terrain generator, without simulating), the climbing gait for the first
`primitives` primitives; everywhere else the base prior's own output. The student, started
at the base prior's mean, is fitted to the rule's targets on the states it visits (DAgger: round
0 walks the rule itself, round r the student of round r − 1), by a cross-entropy between the
net's sigmoid outputs and the targets plus a pull towards the base weights, so it keeps the
base prior's gait where the rule does, and learns where to depart from it. Measured in PyBullet
on 500 held-out terrains (docs/results.md): the student's draws cost 0.124 against the paper's
prior's 0.157 and the base prior's 0.185.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pacplan.worlds.quadruped.gait import GaitParams
from pacplan.worlds.quadruped.policy import policy_action

ETA_EDGE = 0.02
"""A target η at 0 or 1 is moved this far inside: a sigmoid never reaches its ends, and a
cross-entropy chasing one would grow the weights without bound."""


@dataclass(frozen=True)
class OpeningRule:
    """The privileged teacher: `gait` for the first `primitives` primitives on terrains of the
    world's stratum `stratum`, the base policy's own output everywhere else."""

    gait: GaitParams = field(
        default_factory=lambda: GaitParams(a1=1.0, a2=0.6, a_st=0.0, omega=30.0))
    primitives: int = 6
    stratum: str = "steep"

    def opening_eta(self) -> np.ndarray:
        """The η (kept `ETA_EDGE` inside (0, 1)) that the policy map turns into `gait`."""
        return np.clip(self.gait.policy_output(), ETA_EDGE, 1.0 - ETA_EDGE)

    def opens(self, in_stratum: bool, primitive: int) -> bool:
        """Whether the rule runs its opening at this decision."""
        return bool(in_stratum) and primitive < self.primitives


@dataclass(frozen=True)
class OpeningStates:
    """Decision states of episodes with the rule's target η at each (k rows)."""

    seed: np.ndarray  # (k,) int64 terrain seed
    primitive: np.ndarray  # (k,) int64 primitives already run
    depth: np.ndarray  # (k, 50, 50) float32 metres
    proprio: np.ndarray  # (k, 22) float32
    target: np.ndarray  # (k, 4) float64 η the rule asks for
    opens: np.ndarray  # (k,) bool: the target is the opening

    def __len__(self) -> int:
        return int(self.seed.size)

    @staticmethod
    def concat(parts: list[OpeningStates]) -> OpeningStates:
        """All parts' rows, in order."""
        return OpeningStates(*(np.concatenate([getattr(p, k) for p in parts])
                               for k in OpeningStates.__dataclass_fields__))

    def arrays(self) -> dict[str, np.ndarray]:
        """The rows as named arrays (an .npz file's contents)."""
        return {k: getattr(self, k) for k in OpeningStates.__dataclass_fields__}


def walk_and_label(world: Any, rule: OpeningRule, base: np.ndarray, walker: np.ndarray | None,
                   seed: int, in_stratum: bool) -> tuple[OpeningStates, float]:
    """One episode on terrain `seed` and the rule's target at each of its decisions; the gait
    run is the rule's own (`walker` None) or the net `walker`'s. Returns the states and the
    episode's cost."""
    rows: list[tuple[np.ndarray, np.ndarray, np.ndarray, bool]] = []
    opening = rule.opening_eta()

    def control(depth: np.ndarray, proprio: np.ndarray) -> GaitParams:
        k = len(rows)
        opens = rule.opens(in_stratum, k)
        target = opening if opens else policy_action(base, depth, proprio).astype(np.float64)
        run = target if walker is None else policy_action(walker, depth, proprio)
        rows.append((np.asarray(depth, np.float32), np.asarray(proprio, np.float32), target,
                     opens))
        return GaitParams.from_policy_output(run)

    result = world.run(control, int(seed))
    k = len(rows)
    states = OpeningStates(
        seed=np.full(k, int(seed), np.int64), primitive=np.arange(k, dtype=np.int64),
        depth=np.array([r[0] for r in rows], np.float32).reshape(k, 50, 50),
        proprio=np.array([r[1] for r in rows], np.float32).reshape(k, 22),
        target=np.array([r[2] for r in rows], np.float64).reshape(k, 4),
        opens=np.array([r[3] for r in rows], bool))
    return states, float(result.cost)


def fit(start: np.ndarray, base: np.ndarray, data: OpeningStates, *, opening_weight: float,
        pull: float, iterations: int) -> tuple[np.ndarray, float]:
    """The net fitted to the rule's targets from weights `start`: full-batch L-BFGS on the
    mean cross-entropy between the net's η and the targets (above the targets' own entropy,
    so a perfect fit scores 0), the opening states weighted `opening_weight`, plus `pull` ×
    the squared distance to `base` in standardised coordinates. Deterministic on CPU (one
    torch thread, full batch). Returns the weights (float64, the policy's layout) and the
    final loss."""
    import torch

    from pacplan.worlds.quadruped.distill import (
        from_standardised,
        input_scales,
        net_output,
        to_standardised,
    )

    torch.set_num_threads(1)
    d_mu, d_sd, p_mu, p_sd = input_scales(data.depth, data.proprio)
    params = [torch.tensor(a, dtype=torch.float64, requires_grad=True)
              for a in to_standardised(start, d_mu, d_sd, p_mu, p_sd)]
    anchor = [torch.tensor(a, dtype=torch.float64)
              for a in to_standardised(base, d_mu, d_sd, p_mu, p_sd)]
    depth = torch.tensor((data.depth.astype(np.float64) - d_mu) / d_sd).unsqueeze(1)
    prop = torch.tensor((data.proprio.astype(np.float64) - p_mu) / p_sd)
    y = torch.tensor(data.target, dtype=torch.float64)
    w = torch.tensor(np.where(data.opens, opening_weight, 1.0), dtype=torch.float64)
    floor = torch.nn.functional.binary_cross_entropy(y, y, reduction="none").sum(dim=1)
    opt = torch.optim.LBFGS(params, max_iter=iterations, history_size=50,
                            line_search_fn="strong_wolfe", tolerance_grad=1e-10,
                            tolerance_change=1e-14)

    def loss_fn() -> Any:
        eta = net_output(params, depth, prop).clamp(1e-12, 1.0 - 1e-12)
        ce = torch.nn.functional.binary_cross_entropy(eta, y, reduction="none").sum(dim=1)
        return (((ce - floor) * w).sum() / w.sum()
                + pull * sum(((p - a) ** 2).sum() for p, a in zip(params, anchor, strict=True)))

    def closure() -> Any:
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        return loss

    opt.step(closure)
    with torch.no_grad():
        final = float(loss_fn())
    out = [p.detach().numpy() for p in params]
    return from_standardised(*out, d_mu, d_sd, p_mu, p_sd), final
