"""The stages of a run, each resumable: prior → policies → cost matrices → certificates.

Every stage skips what the run directory already holds, after checking its hash against the
manifest. Cost matrices are built chunk by chunk: each finished chunk is written atomically to
`costs/<role>.chunks/`, so a killed run resumes without recomputing anything finished; the full
matrix is assembled once every chunk exists.

A given prior is checked before it is copied: its tensors, its size, and the seeds it records
it was trained on, which the certificates then state (see `ensure_prior`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import RunConfig, config_to_dict
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import load_prior, load_prior_seeds, read_prior
from pacplan.es.draws import draw_policies
from pacplan.io.files import (
    atomic_save_npy,
    atomic_write_bytes,
    sha256_file,
)
from pacplan.pacbayes.certificate import build_certificate
from pacplan.pacbayes.matrices import CostMatrix, matrix_from_bytes, rational_bytes
from pacplan.pacbayes.record import Certificate, relative_path
from pacplan.pipeline.execution.chunks import ChunkStore
from pacplan.pipeline.execution.executors import Executor, WorldSpec, chunk_grid
from pacplan.pipeline.execution.progress import progress_bar
from pacplan.pipeline.prior.prior_world import recorded_prior_world, transfer_note
from pacplan.pipeline.prior.training import train_prior
from pacplan.pipeline.rundir import Manifest, RunDir
from pacplan.validation import check_unit_costs, overlapping_ranges


def world_spec(cfg: RunConfig, **overrides: Any) -> WorldSpec:
    """The run's world (with baseline overrides), as a spec any process can rebuild."""
    return WorldSpec(cfg.world.name, {**cfg.world.options, **overrides})


def ensure_prior(cfg: RunConfig, rd: RunDir, manifest: Manifest, executor: Executor,
                 prior_file: str | Path | None, progress: bool,
                 log: Callable[[str], None] | None = None) -> str:
    """The prior in the run dir: copied from a given file, or trained (resumably) with ES.

    The seeds the prior records it was trained on are checked against seeds.cert and
    seeds.test (an overlap voids the bound) and recorded in the manifest for the certificates.
    """
    source = prior_file or cfg.prior
    if manifest.check(RunDir.PRIOR):
        held = manifest.sha(RunDir.PRIOR) or ""
        if source is not None and (not Path(source).is_file() or sha256_file(source) != held):
            raise PacplanError(f"{rd.path} holds a different prior than {source}; use a new "
                               f"{rd.option} directory to run with this one")
        seeds = prior_seeds(rd, manifest)
        check_prior_seeds(cfg, seeds, str(rd / RunDir.PRIOR))
    elif source is not None:
        held, seeds = _copy_prior(cfg, rd, manifest, Path(source))
    else:
        train_prior(cfg, rd, executor=executor, progress=progress, log=log)
        seeds = load_prior_seeds(rd / RunDir.PRIOR)
        check_prior_seeds(cfg, seeds, str(rd / RunDir.PRIOR))
        held = manifest.record(RunDir.PRIOR, source="es", seeds=_listed(seeds))
    _say_prior_seeds(cfg, seeds, source or rd / RunDir.PRIOR, log)
    note = transfer_note(recorded_prior_world(rd / RunDir.PRIOR, held, rd.option),
                         config_to_dict(cfg)["world"])
    if note and log:
        log(note)
    return held


def _copy_prior(cfg: RunConfig, rd: RunDir, manifest: Manifest, source: Path
                ) -> tuple[str, tuple[int, int] | None]:
    """Check a given prior file and copy the very bytes checked (read once)."""
    if not source.is_file():
        raise PacplanError(f"prior file not found: {source}")
    data = source.read_bytes()
    prior = read_prior(data, str(source))
    from pacplan.worlds.base import make_world, policy_note

    world = make_world(cfg.world.name, **cfg.world.options)
    dim, note = int(world.policy_dim()), policy_note(world)
    if prior.mu.size != dim:
        raise PacplanError(f"{source}: mu has {prior.mu.size} weights but world "
                           f"{cfg.world.name!r}{f' ({note})' if note else ''} needs {dim}")
    check_prior_seeds(cfg, prior.seeds, str(source))
    atomic_write_bytes(rd / RunDir.PRIOR, data)
    held = manifest.record(RunDir.PRIOR, source=relative_path(source, rd.path),
                           seeds=_listed(prior.seeds))
    return held, prior.seeds


def _listed(seeds: tuple[int, int] | None) -> list[int] | None:
    return None if seeds is None else [int(seeds[0]), int(seeds[1])]


def check_prior_seeds(cfg: RunConfig, seeds: Sequence[int] | None, name: str) -> None:
    """Refuse a prior trained on certification or test environments: it would void the bound."""
    if seeds is None:
        return
    a0, a1 = int(seeds[0]), int(seeds[1])
    ranges = {"prior": (a0, a1), "cert": cfg.seeds.cert, "test": cfg.seeds.test}
    clashes = [b for a, b in overlapping_ranges(ranges) if a == "prior"]
    if clashes:
        role = clashes[0]
        b0, b1 = getattr(cfg.seeds, role)
        raise PacplanError(f"{name}: prior_seeds [{a0}, {a1}) overlap seeds.{role} "
                           f"[{b0}, {b1}) of this config; a prior trained on certification "
                           "or test environments voids the bound: use a prior trained on "
                           f"other seeds, or other seeds.{role}")


def prior_seeds(rd: RunDir, manifest: Manifest) -> tuple[int, int] | None:
    """The seeds the run's prior records it was trained on (None: it does not say)."""
    inputs = manifest.inputs(RunDir.PRIOR)
    if "seeds" in inputs:  # recorded when the prior was made or copied
        seeds = inputs["seeds"]
        return None if seeds is None else (int(seeds[0]), int(seeds[1]))
    return load_prior_seeds(rd / RunDir.PRIOR)  # a manifest from before seeds were recorded


def _say_prior_seeds(cfg: RunConfig, seeds: tuple[int, int] | None, source: str | Path,
                     log: Callable[[str], None] | None) -> None:
    """Tell whose seeds the certificates will state, when it is not the config's own claim."""
    say = log or (lambda _msg: None)
    configured = [int(x) for x in cfg.seeds.prior]
    if seeds is None:
        say(f"prior {source} records no training seeds; certificates state the config's "
            f"seeds.prior {configured} (make sure the prior was trained on them)")
    elif list(seeds) != configured:
        say(f"prior {source} was trained on seeds {list(seeds)}; certificates state those, not "
            f"the config's seeds.prior {configured}")


def ensure_policies(cfg: RunConfig, rd: RunDir, manifest: Manifest, prior_sha: str) -> str:
    """Draw the m policies from the prior once and store them (`pacplan.es.draws`: a run that
    leaves them out has them drawn again, checked against the recorded sha256)."""
    inputs = {"prior": prior_sha, "m": cfg.policies.m, "seed": cfg.policies.seed}
    if manifest.check(RunDir.POLICIES, **inputs):
        return manifest.sha(RunDir.POLICIES) or ""
    mu, logvar = load_prior(rd / RunDir.PRIOR)
    atomic_save_npy(rd / RunDir.POLICIES, draw_policies(mu, logvar, cfg.policies.m,
                                                        cfg.policies.seed))
    return manifest.record(RunDir.POLICIES, **inputs)


def ensure_costs(role: str, spec: WorldSpec, thetas: np.ndarray, seeds: np.ndarray,
                 rd: RunDir, manifest: Manifest, executor: Executor, inputs: dict[str, Any],
                 progress: bool, denominator: int | None = None,
                 log: Callable[[str], None] | None = None,
                 computed: Callable[[int, float], None] | None = None) -> np.ndarray:
    """costs/<role>.npy (or, with a `denominator`, the exact rational costs/<role>.safetensors):
    every policy on every seed, resumable chunk by chunk (`log` hears how many were kept;
    `computed` hears the rollouts and CPU seconds of each chunk computed here, not kept)."""
    name = RunDir.costs(role, rational=denominator is not None)
    finished = manifest.read_checked(name, **inputs)  # the bytes hashed are the bytes used
    if finished is not None:
        return matrix_from_bytes(finished, f"{name} in {rd.path}")
    store = ChunkStore(rd.chunks(role), inputs)
    grid = chunk_grid(len(seeds), len(thetas), executor.chunk_seeds, executor.chunk_policies)
    done = store.done(grid)
    if done and log is not None:
        log(f"resumed: {role} costs, {len(done)} of {len(grid)} chunks kept")
    with progress_bar(progress, f"{role} costs", len(grid), len(done)) as bar:
        for chunk in executor.iter_chunks(spec, thetas, seeds, skip=done):
            # checked where it was computed (`tasks.compute_task`: shape, [0, 1], float64)
            store.save(chunk.key, chunk.block)
            if computed is not None:
                computed(int(chunk.block.size), chunk.cpu_s)
            bar.advance()
    matrix = store.assemble(grid, (len(seeds), len(thetas)))
    if denominator is None:
        atomic_save_npy(rd / name, matrix)
    else:  # certificates are then computed on exactly the decoded values that are stored
        data = rational_bytes(matrix, denominator, f"{role} costs")
        atomic_write_bytes(rd / name, data)
        matrix = matrix_from_bytes(data, f"{name} in {rd.path}")
    manifest.record(name, **inputs)
    store.remove()
    return matrix


def screen_columns(costs: np.ndarray, keep: int) -> list[int]:
    """The `keep` policies of least mean cost on the screening rows, in increasing order; ties
    go to the lower index. Column sums are exactly rounded (`math.fsum`), so every CPU keeps
    the same policies (a BLAS or SIMD sum order could flip a near-tie)."""
    sums = np.array([math.fsum(column) for column in np.asarray(costs, dtype=np.float64).T])
    return sorted(int(i) for i in np.argsort(sums, kind="stable")[:keep])


def ensure_screened(rd: RunDir, manifest: Manifest, cert: np.ndarray, rest: np.ndarray | None,
                    columns: list[int], inputs: dict[str, Any],
                    denominator: int | None) -> np.ndarray:
    """costs/cert-screened: the kept columns of the screening rows, then the rows computed for
    those columns only; what a screened certificate's cert_matrix names."""
    name = RunDir.costs(RunDir.cert_role(columns), rational=denominator is not None)
    finished = manifest.read_checked(name, **inputs)
    if finished is not None:
        return matrix_from_bytes(finished, f"{name} in {rd.path}")
    parts = [cert[:, columns]] + ([] if rest is None else [rest])
    matrix = np.ascontiguousarray(np.vstack(parts), dtype=np.float64)
    if denominator is None:
        atomic_save_npy(rd / name, matrix)
    else:
        data = rational_bytes(matrix, denominator, "screened certification costs")
        atomic_write_bytes(rd / name, data)
        matrix = matrix_from_bytes(data, f"{name} in {rd.path}")
    manifest.record(name, **inputs)
    return matrix


def certify(cfg: RunConfig, rd: RunDir, manifest: Manifest, cert: np.ndarray,
            test: np.ndarray, columns: list[int] | None = None) -> dict[int, Certificate]:
    """One certificate per N in the config (first N rows); certificate.json is the largest N.
    With `columns` (a screened run), `cert` is costs/cert-screened and `test` holds those
    columns: each posterior lives on them."""
    rational = cfg.storage.cost_denominator is not None
    cert_name = RunDir.costs(RunDir.cert_role(columns), rational)
    test_ref = _matrix(rd, manifest, RunDir.costs("test", rational), test)
    recorded = prior_seeds(rd, manifest)  # the prior's own seeds, else the config's claim
    trained_on = list(recorded) if recorded is not None else list(cfg.seeds.prior)
    world = config_to_dict(cfg)["world"]
    trained_in = recorded_prior_world(rd / RunDir.PRIOR, manifest.sha(RunDir.PRIOR),
                                      rd.option)
    out: dict[int, Certificate] = {}
    for n in sorted(cfg.certificate.n or []):
        cert_ref = _matrix(rd, manifest, cert_name, cert[:n])
        provenance = {
            "world": world,
            "seeds": {"prior": trained_on,
                      "cert": [cfg.seeds.cert[0], cfg.seeds.cert[0] + n],
                      "test": list(cfg.seeds.test)},
            "prior_sha256": manifest.sha(RunDir.PRIOR),
            "policies_sha256": manifest.sha(RunDir.POLICIES),
        }
        if trained_in is not None:  # where the prior file says it was trained
            provenance["prior_world"] = trained_in
        c = build_certificate(cert_ref, cfg.certificate.delta, cfg.certificate.bound,
                              cfg.certificate.solver, test=test_ref, provenance=provenance,
                              columns=columns, m=cfg.policies.m)
        c.save(rd.certificate(n))
        out[n] = c
    if out:
        out[max(out)].save(rd / RunDir.CERTIFICATE)
    return out


def _matrix(rd: RunDir, manifest: Manifest, name: str, values: np.ndarray) -> CostMatrix:
    """The (first rows of the) finished matrix `name`, with its recorded hash."""
    checked, clipped = check_unit_costs(values, name)
    return CostMatrix(values=checked, path=rd / name, sha256=manifest.sha(name) or "",
                      rows=checked.shape[0], clipped=clipped)
