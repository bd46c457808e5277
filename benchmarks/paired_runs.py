"""Two runs' posteriors on the same test environments, paired; ONE JSON object.

    python benchmarks/paired_runs.py RUN_A RUN_B [--n-a N] [--n-b N] [--stratum NAME]

Why: two priors certified in the same world on the same test seeds (say the taught `quadruped`
in results/quadruped and the ES-only `quadruped-es` in results/quadruped-es) give two test costs
whose 99 % intervals overlap, yet on the same environments their difference is measured far
more tightly. Each run's certificate (N = --n-a / --n-b; by default its certificate.json) is
verified first (`pacplan verify`: its matrices' sha256, every number recomputed); a posterior's
cost on a test environment is its expected cost there, p · (that row of the test matrix).

Printed: both test costs, A − B per environment with its 99 % percentile bootstrap interval
(the report's paired table, seed 0) and on how many environments A is lower, higher or tied.
Bad input (not a run with a verified certificate and test matrix, an N it did not certify,
another world or other test seeds) is one line, exit 2, before any work. Two policy families
(the UAV's `policy`, `policy_width`) in the same world pair: they fly the same environments.
With --stratum NAME (a stratum the world names, e.g. the quadruped's `steep` first tents) the
same pairing is also printed inside and outside that stratum, to see where two priors differ.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.errors import PacplanError
from pacplan.export.write import certificate_path
from pacplan.pacbayes.matrices import load_cost_matrix
from pacplan.pacbayes.posterior import mixture_costs
from pacplan.pacbayes.record import Certificate
from pacplan.pipeline.provenance import verify_certificate
from pacplan.report.tables import paired_difference


def certificate_of(run: Path, n: int | None) -> Certificate:
    """The run's verified certificate for N = n (its certificate.json when n is None), found
    as `pacplan export` finds it."""
    path = certificate_path(run, n)
    cert = verify_certificate(path)
    if cert.test_matrix is None:
        raise PacplanError(f"{path}: the certificate has no test matrix to compare on")
    if "test" not in cert.provenance.get("seeds", {}):
        raise PacplanError(f"{path}: the certificate records no test seeds (a matrix certified "
                           "on its own): only environments known by their seeds pair")
    return cert


def posterior_costs(cert: Certificate) -> np.ndarray:
    """Per test environment, the posterior's expected cost (the matrix verify just checked)."""
    # .npy or rational .safetensors (storage.cost_denominator: the tight runs)
    test = load_cost_matrix(cert.test_matrix.path).values  # type: ignore[union-attr]
    return mixture_costs(test, cert.matrix_p())  # a screened certificate: its columns


def environments(world: dict[str, Any] | None) -> dict[str, Any] | None:
    """A certificate's world without the options that choose what θ is (the world's
    `PRIOR_OPTIONS`: the UAV's policy family), so two policy families pair on the same
    environments; every option that shapes the environments or the cost still must match."""
    if not world:
        return world
    from pacplan.worlds.base import prior_options

    family = set(prior_options(world["name"]))
    return {**world, "options": {k: v for k, v in world["options"].items() if k not in family}}


def paired(cost_a: np.ndarray, cost_b: np.ndarray) -> dict[str, Any]:
    """Both mean costs and A − B with its 99 % paired interval, on the given environments."""
    d = paired_difference(cost_a, cost_b)
    return {
        "environments": int(cost_a.size),
        "test_cost": [round(float(cost_a.mean()), 6), round(float(cost_b.mean()), 6)],
        "a_minus_b": round(d["mean"], 6), "a_minus_b_ci99": [round(x, 6) for x in d["ci99"]],
        "a_lower_higher_tied": [d["lower"], d["higher"], d["tied"]],
    }


def by_stratum(world: dict[str, Any], seeds: list[int], name: str, cost_a: np.ndarray,
               cost_b: np.ndarray) -> dict[str, Any]:
    """The pairing inside and outside stratum `name` of the runs' world (refused in one line
    when the world names no such stratum)."""
    from pacplan.worlds import make_world
    from pacplan.worlds.base import stratum_members

    made = make_world(world["name"], **world.get("options", {}))
    inside = stratum_members(made, name, np.arange(seeds[0], seeds[1]))
    if inside.all() or not inside.any():
        where = "every one" if inside.all() else "none"
        raise PacplanError(f"stratum {name!r} holds {where} of the {inside.size} test "
                           "environments: there is nothing to split")
    return {"stratum": name, "description": made.strata()[name],
            "inside": paired(cost_a[inside], cost_b[inside]),
            "outside": paired(cost_a[~inside], cost_b[~inside])}


def compare(run_a: Path, run_b: Path, n_a: int | None, n_b: int | None,
            stratum: str | None = None) -> dict[str, Any]:
    """The JSON object printed: both posteriors on the shared test environments, paired."""
    a, b = certificate_of(run_a, n_a), certificate_of(run_b, n_b)
    world_a, world_b = environments(a.provenance.get("world")), environments(b.provenance.get(
        "world"))
    if world_a != world_b:
        raise PacplanError(f"the runs' worlds differ ({world_a} against {world_b}): costs in "
                           "two worlds do not pair")
    seeds_a, seeds_b = a.provenance["seeds"]["test"], b.provenance["seeds"]["test"]
    if seeds_a != seeds_b:
        raise PacplanError(f"the runs' test seeds differ ({seeds_a} against {seeds_b}): "
                           "only the same environments pair")
    cost_a, cost_b = posterior_costs(a), posterior_costs(b)
    result = {
        "benchmark": "paired_runs",
        "runs": [str(run_a), str(run_b)], "n": [a.n, b.n],
        "certified": [round(a.certified, 6), round(b.certified, 6)],
        "test_seeds": seeds_a, **paired(cost_a, cost_b),
        "bootstrap": "percentile, 10,000 resamples of environments, numpy default_rng(0)",
    }
    if stratum is not None:
        result["by_stratum"] = by_stratum(a.provenance["world"], seeds_a, stratum, cost_a,
                                          cost_b)
    return result


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_a", type=Path)
    ap.add_argument("run_b", type=Path)
    ap.add_argument("--n-a", type=int, default=None, help="RUN_A's N (default: its headline)")
    ap.add_argument("--n-b", type=int, default=None, help="RUN_B's N (default: its headline)")
    ap.add_argument("--stratum", default=None,
                    help="also pair inside and outside this stratum of the runs' world")
    args = ap.parse_args(argv)
    try:
        result = compare(args.run_a, args.run_b, args.n_a, args.n_b, args.stratum)
    except PacplanError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    print(json.dumps(result))


if __name__ == "__main__":
    main()
