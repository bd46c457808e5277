"""The stages of a run, each resumable: prior → policies → cost matrices → certificates.

Every stage skips what the run directory already holds, after checking its hash against the
manifest. Cost matrices are built chunk by chunk: each finished chunk is written atomically to
`costs/<role>.chunks/`, so a killed run resumes without recomputing anything finished; the full
matrix is assembled once every chunk exists.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import RunConfig, config_to_dict
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import load_prior
from pacplan.files import atomic_save_npy, load_npy, sha256_file
from pacplan.pacbayes.certificate import Certificate, build_certificate, relative_path
from pacplan.pacbayes.matrices import CostMatrix
from pacplan.run.executors import Executor, WorldSpec, chunk_grid
from pacplan.run.progress import progress_bar
from pacplan.run.rundir import ChunkStore, Manifest, RunDir
from pacplan.run.training import train_prior
from pacplan.validation import check_unit_costs


def world_spec(cfg: RunConfig, **overrides: Any) -> WorldSpec:
    """The run's world (with baseline overrides), as a spec any process can rebuild."""
    return WorldSpec(cfg.world.name, {**cfg.world.options, **overrides})


def ensure_prior(cfg: RunConfig, rd: RunDir, manifest: Manifest, executor: Executor,
                 prior_file: str | Path | None, progress: bool) -> str:
    """The prior in the run dir: copied from a given file, or trained (resumably) with ES."""
    source = prior_file or cfg.prior
    if manifest.check(RunDir.PRIOR):
        held = manifest.sha(RunDir.PRIOR) or ""
        if source is not None and (not Path(source).is_file() or sha256_file(source) != held):
            raise PacplanError(f"{rd.path} holds a different prior than {source}; use a new "
                               "--out directory to run with this one")
        return held
    if source is not None:
        source = Path(source)
        if not source.is_file():
            raise PacplanError(f"prior file not found: {source}")
        mu, logvar = load_prior(source)  # validates the file before it is used
        from pacplan.worlds.base import make_world

        dim = int(make_world(cfg.world.name, **cfg.world.options).policy_dim())
        if mu.size != dim or logvar.size != dim:
            raise PacplanError(f"prior {source} has {mu.size} weights but world "
                               f"{cfg.world.name!r} needs {dim}")
        shutil.copyfile(source, rd / RunDir.PRIOR)
        return manifest.record(RunDir.PRIOR, source=relative_path(source, rd.path))
    train_prior(cfg, rd.path, executor=executor, progress=progress)
    return manifest.record(RunDir.PRIOR, source="es")


def ensure_policies(cfg: RunConfig, rd: RunDir, manifest: Manifest, prior_sha: str) -> str:
    """Draw the m policies from the prior once and store them (never re-derived from an RNG)."""
    inputs = {"prior": prior_sha, "m": cfg.policies.m, "seed": cfg.policies.seed}
    if manifest.check(RunDir.POLICIES, **inputs):
        return manifest.sha(RunDir.POLICIES) or ""
    mu, logvar = load_prior(rd / RunDir.PRIOR)
    rng = np.random.default_rng(cfg.policies.seed)
    sigma = np.exp(0.5 * logvar.astype(np.float64))
    thetas = mu.astype(np.float64) + sigma * rng.standard_normal((cfg.policies.m, mu.size))
    atomic_save_npy(rd / RunDir.POLICIES, thetas.astype(np.float32))
    return manifest.record(RunDir.POLICIES, **inputs)


def ensure_costs(role: str, spec: WorldSpec, thetas: np.ndarray, seeds: np.ndarray,
                 rd: RunDir, manifest: Manifest, executor: Executor, inputs: dict[str, Any],
                 progress: bool) -> np.ndarray:
    """costs/<role>.npy: every policy on every seed, resumable chunk by chunk."""
    name = RunDir.costs(role)
    if manifest.check(name, **inputs):
        return load_npy(rd / name)
    store = ChunkStore(rd.chunks(role), inputs)
    done = store.done()
    total = len(chunk_grid(len(seeds), len(thetas), executor.chunk_seeds,
                           executor.chunk_policies))
    with progress_bar(progress, f"{role} costs", total, len(done)) as bar:
        for chunk in executor.iter_chunks(spec, thetas, seeds, skip=done):
            block, _ = check_unit_costs(chunk.block, f"{role} costs of seeds "
                                        f"{seeds[chunk.seeds.start]}…{seeds[chunk.seeds.stop - 1]}")
            store.save(chunk.key, block)
            bar.advance()
    matrix = store.assemble((len(seeds), len(thetas)))
    if np.isnan(matrix).any():
        raise PacplanError(f"{role} cost matrix is incomplete after all chunks ran")
    atomic_save_npy(rd / name, matrix)
    manifest.record(name, **inputs)
    store.remove()
    return matrix


def certify(cfg: RunConfig, rd: RunDir, manifest: Manifest, cert: np.ndarray,
            test: np.ndarray) -> dict[int, Certificate]:
    """One certificate per N in the config (first N rows); certificate.json is the largest N."""
    test_ref = _matrix(rd, manifest, RunDir.costs("test"), test)
    out: dict[int, Certificate] = {}
    for n in sorted(cfg.certificate.n or []):
        cert_ref = _matrix(rd, manifest, RunDir.costs("cert"), cert[:n])
        provenance = {
            "world": config_to_dict(cfg)["world"],
            "seeds": {"prior": list(cfg.seeds.prior),
                      "cert": [cfg.seeds.cert[0], cfg.seeds.cert[0] + n],
                      "test": list(cfg.seeds.test)},
            "prior_sha256": manifest.sha(RunDir.PRIOR),
            "policies_sha256": manifest.sha(RunDir.POLICIES),
        }
        c = build_certificate(cert_ref, cfg.certificate.delta, cfg.certificate.bound,
                              cfg.certificate.solver, test=test_ref, provenance=provenance)
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
