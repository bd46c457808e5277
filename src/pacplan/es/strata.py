"""Stratified environment draws for ES: over-draw a world's strata, keep the objective unbiased.

A world may name strata of its environments (`pacplan.worlds.base.StratifiedWorld`): predicates
on a seed, computed without simulating. With `es.strata`, each iteration draws
round(share · n) of its n environments from each named stratum (in the order given; a seed in
several counts in the first) and the rest from the seeds in none, each cell's draws distinct and
uniform within the cell. Environment i of cell c gets the importance weight

    w_c = p_c / (n_c / n)

(p_c the cell's probability under plain uniform draws from the prior seed range, n_c the
environments drawn from it), so (1/n) Σ w_i f_i = Σ_c p_c · mean_c f is an unbiased estimate of
E f: the weighted training cost and the ES gradients built from weighted costs estimate what
plain sampling estimates, with more of the draws where the prior fails. p_c is counted over the
whole prior seed range when it holds at most `COUNT_LIMIT` seeds (exact), otherwise over a fixed
sample of that many (recorded as such).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from pacplan.config.training import StratumConfig
from pacplan.errors import PacplanError
from pacplan.worlds.base import stratum_members, world_strata

COUNT_LIMIT = 200_000
"""Seed ranges up to this size are classified seed by seed; larger ones by a fixed sample."""
REST = "(rest)"
"""How records name the seeds in no stratum."""
_SAMPLE_SEED = 20_201_065  # the fixed sample of a large range (any constant: it is recorded)
_MAX_ROUNDS = 1000  # rejection rounds before a large range's draw is given up

Classifier = Callable[[np.ndarray], np.ndarray]
"""seeds (k,) int64 -> cell index (k,) int64: j for the j-th named stratum, len(names) for none."""


@dataclass(frozen=True)
class StrataPlan:
    """Checked strata of one run: per cell (the named strata in order, then the rest) the
    environments drawn per iteration, the probability and, when the range was counted in
    full, its seeds."""

    names: tuple[str, ...]
    counts: tuple[int, ...]
    probabilities: tuple[float, ...]
    counted: int
    exact: bool
    members: tuple[np.ndarray, ...] | None
    classify: Classifier

    @property
    def weights(self) -> np.ndarray:
        """The importance weight of an environment of each cell, p_c / (n_c / n)."""
        n = sum(self.counts)
        return np.array([p * n / k for p, k in zip(self.probabilities, self.counts,
                                                    strict=True)])

    def summary(self) -> dict[str, Any]:
        """JSON record of the plan (the ES state keeps it)."""
        cells = {name: {"envs": k, "probability": p, "weight": float(w)}
                 for name, k, p, w in zip((*self.names, REST), self.counts,
                                          self.probabilities, self.weights, strict=True)}
        return {"cells": cells, "seeds_counted": self.counted,
                "counted": "whole range" if self.exact else f"fixed sample (seed {_SAMPLE_SEED})"}

    def sample(self, rng: np.random.Generator, seed_range: tuple[int, int]
               ) -> tuple[np.ndarray, np.ndarray]:
        """(seeds, weights) of one iteration, sorted by seed: `counts[c]` distinct seeds of each
        cell, uniform within it."""
        picked = (self._pick_counted(rng) if self.members is not None
                  else self._pick_rejected(rng, seed_range))
        seeds = np.concatenate(picked).astype(np.int64)
        weights = np.repeat(self.weights, self.counts)
        order = np.argsort(seeds, kind="stable")
        return seeds[order], weights[order]

    def _pick_counted(self, rng: np.random.Generator) -> list[np.ndarray]:
        assert self.members is not None
        return [np.sort(seeds[rng.choice(seeds.size, size=k, replace=False)])
                for seeds, k in zip(self.members, self.counts, strict=True)]

    def _pick_rejected(self, rng: np.random.Generator, seed_range: tuple[int, int]
                       ) -> list[np.ndarray]:
        """Uniform candidates, kept by cell until every cell has its count (a large range)."""
        start, stop = seed_range
        got: list[list[int]] = [[] for _ in self.counts]
        seen: set[int] = set()
        batch = max(1024, 4 * sum(self.counts))
        for _ in range(_MAX_ROUNDS):
            cand = rng.integers(start, stop, size=batch, dtype=np.int64)
            for seed, cell in zip(cand.tolist(), self.classify(cand).tolist(), strict=True):
                if seed not in seen and len(got[cell]) < self.counts[cell]:
                    seen.add(seed)
                    got[cell].append(seed)
            if all(len(g) == k for g, k in zip(got, self.counts, strict=True)):
                return [np.sort(np.array(g, dtype=np.int64)) for g in got]
        raise PacplanError("es.strata: could not draw the iteration's environments from the "
                           f"strata within {_MAX_ROUNDS * batch} candidate seeds")


def cell_classifier(world: Any, names: tuple[str, ...]) -> Classifier:
    """seeds -> cell index: the first named stratum holding the seed, len(names) for none."""
    def classify(seeds: np.ndarray) -> np.ndarray:
        sd = np.asarray(seeds, dtype=np.int64).reshape(-1)
        cell = np.full(sd.size, len(names), dtype=np.int64)
        for j in reversed(range(len(names))):  # the first listed wins
            cell[stratum_members(world, names[j], sd)] = j
        return cell

    return classify


def plan_strata(strata: Mapping[str, StratumConfig], envs_per_iter: int, world: Any,
                seed_range: tuple[int, int]) -> StrataPlan:
    """Check `es.strata` against `world` and the prior seed range and count each cell's
    probability; every refusal is one line naming the stratum, before any rollout."""
    known = world_strata(world)
    names = tuple(strata)
    for name in names:
        if name not in known:
            listed = ", ".join(sorted(known)) if known else "none (it names no strata)"
            raise PacplanError(f"es.strata: unknown stratum {name!r}; world {world.name!r} "
                               f"names: {listed}")
    counts = [round(strata[name].share * envs_per_iter) for name in names]
    for name, k in zip(names, counts, strict=True):
        if k < 1:
            raise PacplanError(f"es.strata.{name}: share {strata[name].share:g} of "
                               f"es.envs_per_iter {envs_per_iter} draws no environment; raise "
                               "one of them")
    counts.append(envs_per_iter - sum(counts))
    if counts[-1] < 1:
        raise PacplanError(f"es.strata: the shares draw all {envs_per_iter} environments of an "
                           "iteration, none from the seeds in no stratum; lower them")
    classify = cell_classifier(world, names)
    start, stop = int(seed_range[0]), int(seed_range[1])
    exact = stop - start <= COUNT_LIMIT
    seeds = (np.arange(start, stop, dtype=np.int64) if exact else np.sort(
        np.random.default_rng(_SAMPLE_SEED).choice(stop - start, COUNT_LIMIT, replace=False)
        + start))
    cells = classify(seeds)
    tally = np.bincount(cells, minlength=len(names) + 1)
    where = (f"seeds.prior [{start}, {stop})" if exact
             else f"a sample of {seeds.size} seeds of seeds.prior [{start}, {stop})")
    for j, (name, k) in enumerate(zip((*names, REST), counts, strict=True)):
        label = f"stratum {name!r} ({known[name]})" if name != REST else "no stratum"
        if tally[j] == 0:
            raise PacplanError(f"es.strata: no seed of {where} lies in {label}")
        if exact and tally[j] < k:
            raise PacplanError(f"es.strata: {label} holds {tally[j]} seeds of {where}, fewer "
                               f"than the {k} environments drawn from it per iteration")
    members = tuple(seeds[cells == j] for j in range(len(names) + 1)) if exact else None
    return StrataPlan(names=names, counts=tuple(int(k) for k in counts),
                      probabilities=tuple(float(t) / seeds.size for t in tally),
                      counted=int(seeds.size), exact=exact, members=members, classify=classify)
