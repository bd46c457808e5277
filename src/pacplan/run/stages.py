"""prior → m stored policies → cost matrices → posterior → certificates, in one run directory.

Every step skips what the run directory already holds, after checking its hash against the
manifest (`pacplan.run.rundir`). Cost matrices are built chunk by chunk: each finished chunk is
written atomically to `costs/<role>.chunks/`, so a killed run resumes without recomputing
anything finished; the full matrix is assembled once every chunk exists.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from pacplan.config import RunConfig, config_to_dict, dump_config
from pacplan.errors import PacplanError
from pacplan.es.algorithm import PRIOR_FILE, load_prior, train_prior
from pacplan.pacbayes.certificate import Certificate, build_certificate, relative_path
from pacplan.pacbayes.matrices import CostMatrix, check_costs, sha256_file
from pacplan.run.executors import Executor, WorldSpec, executor_from_config, get_world
from pacplan.run.rundir import Manifest, atomic_save_npy, load_npy
from pacplan.weights import load_theta

POLICIES_FILE = "policies.npy"
CERTIFICATE_FILE = "certificate.json"
TIMINGS_FILE = "timings.json"


@dataclass
class RunResult:
    """What `run` produced: the certificates by N and the wall time of each step."""

    run_dir: Path
    certificates: dict[int, Certificate]
    seconds: dict[str, float] = field(default_factory=dict)


def world_spec(cfg: RunConfig, **overrides: Any) -> WorldSpec:
    return WorldSpec(cfg.world.name, {**cfg.world.options, **overrides})


def _config_identity(config: dict[str, Any]) -> dict[str, Any]:
    """A config as a dict minus what never changes a result: where the work runs (executor)
    and where input files live. Their contents are checked where they are used: the prior by
    its sha256 in the manifest, a baseline's weights in its matrix's inputs, an ES starting
    mean by the ES fingerprint. So a run directory stays resumable from another checkout."""
    d = json.loads(json.dumps(config))  # a deep copy
    d.pop("executor", None)
    d.pop("prior", None)
    if isinstance(d.get("es", {}).get("init_mean"), str):
        d["es"]["init_mean"] = "<file>"
    for base in d.get("baselines", []):
        if base.get("weights") is not None:
            base["weights"] = "<file>"
    return d


def _freeze_config(cfg: RunConfig, run_dir: Path) -> None:
    """Write config.yaml, or refuse if the directory was made by a different config."""
    path = run_dir / "config.yaml"
    if path.is_file():
        old = _config_identity(yaml.safe_load(path.read_text()) or {})
        new = _config_identity(config_to_dict(cfg))
        if old != new:
            changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
            raise PacplanError(f"{run_dir} was made by a different config (changed: "
                               f"{', '.join(changed)}); use a new --out directory")
    dump_config(cfg, path)


# ----------------------------------------------------------------------------- steps


def ensure_prior(cfg: RunConfig, run_dir: Path, manifest: Manifest, executor: Executor,
                 prior_file: str | Path | None, progress: bool) -> str:
    """The prior in the run dir: copied from a given file, or trained (resumably) with ES."""
    source = prior_file or cfg.prior
    target = run_dir / PRIOR_FILE
    if manifest.check(PRIOR_FILE):
        held = manifest.sha(PRIOR_FILE) or ""
        if source is not None and (not Path(source).is_file() or sha256_file(source) != held):
            raise PacplanError(f"{run_dir} holds a different prior than {source}; use a new "
                               "--out directory to run with this one")
        return held
    if source is not None:
        source = Path(source)
        if not source.is_file():
            raise PacplanError(f"prior file not found: {source}")
        mu, logvar = load_prior(source)  # validates the file before it is used
        dim = int(get_world(world_spec(cfg)).policy_dim())
        if mu.size != dim or logvar.size != dim:
            raise PacplanError(f"prior {source} has {mu.size} weights but world "
                               f"{cfg.world.name!r} needs {dim}")
        shutil.copyfile(source, target)
        return manifest.record(PRIOR_FILE, source=relative_path(source, run_dir))
    train_prior(cfg, run_dir, executor=executor, progress=progress)
    return manifest.record(PRIOR_FILE, source="es")


def ensure_policies(cfg: RunConfig, run_dir: Path, manifest: Manifest, prior_sha: str) -> str:
    """Draw the m policies from the prior once and store them (never re-derived from an RNG)."""
    inputs = {"prior": prior_sha, "m": cfg.policies.m, "seed": cfg.policies.seed}
    if manifest.check(POLICIES_FILE, **inputs):
        return manifest.sha(POLICIES_FILE) or ""
    mu, logvar = load_prior(run_dir / PRIOR_FILE)
    rng = np.random.default_rng(cfg.policies.seed)
    sigma = np.exp(0.5 * logvar.astype(np.float64))
    thetas = mu.astype(np.float64) + sigma * rng.standard_normal((cfg.policies.m, mu.size))
    atomic_save_npy(run_dir / POLICIES_FILE, thetas.astype(np.float32))
    return manifest.record(POLICIES_FILE, **inputs)


class ChunkStore:
    """Finished chunks of one cost matrix, one atomic .npy per (seed start, policy start).

    With `inputs`, the folder is stamped with them (inputs.json) and chunks left by a run
    with other inputs (say, a baseline whose weights file changed since) are discarded.
    """

    STAMP = "inputs.json"

    def __init__(self, folder: Path, inputs: dict[str, Any] | None = None):
        self.folder = folder
        if inputs is None:
            return
        stamp = json.dumps(inputs, sort_keys=True)
        path = folder / self.STAMP
        if path.is_file() and path.read_text() != stamp:
            shutil.rmtree(folder)
        if not path.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            path.write_text(stamp)

    @staticmethod
    def _name(key: tuple[int, int]) -> str:
        return f"s{key[0]:09d}_t{key[1]:06d}.npy"

    def done(self) -> set[tuple[int, int]]:
        if not self.folder.is_dir():
            return set()
        keys = set()
        for f in self.folder.glob("s*_t*.npy"):
            s, t = f.stem[1:].split("_t")
            keys.add((int(s), int(t)))
        return keys

    def save(self, key: tuple[int, int], block: np.ndarray) -> None:
        atomic_save_npy(self.folder / self._name(key), block)

    def assemble(self, shape: tuple[int, int]) -> np.ndarray:
        out = np.full(shape, np.nan)
        for s, t in self.done():
            block = load_npy(self.folder / self._name((s, t)))
            out[s : s + block.shape[0], t : t + block.shape[1]] = block
        return out


def ensure_costs(role: str, spec: WorldSpec, thetas: np.ndarray, seeds: np.ndarray,
                 run_dir: Path, manifest: Manifest, executor: Executor, inputs: dict[str, Any],
                 progress: bool) -> np.ndarray:
    """costs/<role>.npy: every policy on every seed, resumable chunk by chunk."""
    name = f"costs/{role}.npy"
    if manifest.check(name, **inputs):
        return load_npy(run_dir / name)
    store = ChunkStore(run_dir / "costs" / f"{role}.chunks", inputs)
    done = store.done()
    total = len(list(_grid(executor, len(seeds), len(thetas))))
    bar = _progress_bar(progress, f"{role} costs", total, len(done))
    try:
        for chunk in executor.iter_chunks(spec, thetas, seeds, skip=done):
            block, _ = check_costs(chunk.block, f"{role} costs of seeds "
                                   f"{seeds[chunk.seeds.start]}…{seeds[chunk.seeds.stop - 1]}")
            store.save(chunk.key, block)
            if bar is not None:
                bar[0].update(bar[1], advance=1)
    finally:
        if bar is not None:
            bar[0].stop()
    matrix = store.assemble((len(seeds), len(thetas)))
    if np.isnan(matrix).any():
        raise PacplanError(f"{role} cost matrix is incomplete after all chunks ran")
    atomic_save_npy(run_dir / name, matrix)
    manifest.record(name, **inputs)
    shutil.rmtree(store.folder, ignore_errors=True)
    return matrix


def _grid(executor: Executor, n_seeds: int, n_thetas: int):
    from pacplan.run.executors import chunk_grid

    return chunk_grid(n_seeds, n_thetas, executor.chunk_seeds, executor.chunk_policies)


def _progress_bar(enabled: bool, label: str, total: int, done: int):
    if not enabled:
        return None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(),
                   TimeRemainingColumn(), transient=False)
    task = bar.add_task(label, total=total, completed=done)
    bar.start()
    return bar, task


def _seed_array(seed_range: tuple[int, int] | list[int], count: int | None = None) -> np.ndarray:
    start, stop = int(seed_range[0]), int(seed_range[1])
    if count is not None:
        stop = start + count
    return np.arange(start, stop, dtype=np.int64)


def certify(cfg: RunConfig, run_dir: Path, manifest: Manifest, cert: np.ndarray,
            test: np.ndarray) -> dict[int, Certificate]:
    """One certificate per N in the config (first N rows); certificate.json is the largest N."""
    test_ref = _matrix(run_dir, manifest, "costs/test.npy", test)
    out: dict[int, Certificate] = {}
    for n in sorted(cfg.certificate.n or []):
        cert_ref = _matrix(run_dir, manifest, "costs/cert.npy", cert[:n])
        provenance = {
            "world": config_to_dict(cfg)["world"],
            "seeds": {"prior": list(cfg.seeds.prior),
                      "cert": [cfg.seeds.cert[0], cfg.seeds.cert[0] + n],
                      "test": list(cfg.seeds.test)},
            "prior_sha256": manifest.sha(PRIOR_FILE),
            "policies_sha256": manifest.sha(POLICIES_FILE),
        }
        c = build_certificate(cert_ref, cfg.certificate.delta, cfg.certificate.bound,
                              cfg.certificate.solver, test=test_ref, provenance=provenance)
        c.save(run_dir / "certificates" / f"N{n}.json")
        out[n] = c
    if out:
        out[max(out)].save(run_dir / CERTIFICATE_FILE)
    return out


def _matrix(run_dir: Path, manifest: Manifest, name: str, values: np.ndarray) -> CostMatrix:
    """The (first rows of the) finished matrix `name`, with its recorded hash."""
    checked, clipped = check_costs(values, name)
    return CostMatrix(values=checked, path=run_dir / name, sha256=manifest.sha(name) or "",
                      rows=checked.shape[0], clipped=clipped)


# ----------------------------------------------------------------------------- the run


def run(cfg: RunConfig, run_dir: str | Path, prior_file: str | Path | None = None,
        progress: bool = True, executor: Executor | None = None,
        log: Callable[[str], None] | None = None) -> RunResult:
    """Run (or resume) every step of `cfg` in `run_dir`."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    _freeze_config(cfg, run_dir)
    manifest = Manifest(run_dir)
    say = log or (lambda _msg: None)
    own = executor is None
    ex = executor_from_config(cfg.executor) if own else executor
    seconds: dict[str, float] = {}

    def step(name: str, fn: Callable[[], Any]) -> Any:
        t0 = time.perf_counter()
        result = fn()
        seconds[name] = round(time.perf_counter() - t0, 3)
        say(f"{name}: {seconds[name]:.1f} s")
        return result

    try:
        prior_sha = step("prior", lambda: ensure_prior(cfg, run_dir, manifest, ex, prior_file,
                                                      progress))
        policies_sha = step("policies", lambda: ensure_policies(cfg, run_dir, manifest, prior_sha))
        thetas = load_npy(run_dir / POLICIES_FILE)
        spec = world_spec(cfg)
        world = config_to_dict(cfg)["world"]
        n_cert = max(cfg.certificate.n or [1])
        roles = {"cert": _seed_array(cfg.seeds.cert, n_cert), "test": _seed_array(cfg.seeds.test)}
        matrices = {}
        for role, seeds in roles.items():
            inputs = {"policies": policies_sha, "world": world,
                      "seeds": [int(seeds[0]), int(seeds[-1]) + 1]}
            matrices[role] = step(f"{role} costs", lambda role=role, seeds=seeds, inputs=inputs:
                                  ensure_costs(role, spec, thetas, seeds, run_dir, manifest, ex,
                                               inputs, progress))
        for base in cfg.baselines:
            b_spec = world_spec(cfg, **base.world_options)
            inputs = {"world": {"name": b_spec.name, "options": b_spec.options},
                      "seeds": list(cfg.seeds.test)}
            if base.weights is None:
                fixed = np.zeros((1, thetas.shape[1]), dtype=np.float32)
            else:  # the file's content is an input, not its path
                fixed = load_theta(base.weights, thetas.shape[1], cfg.world.name)[None, :]
                inputs["weights_sha256"] = hashlib.sha256(fixed.tobytes()).hexdigest()
            step(f"baseline {base.name}", lambda base=base, b_spec=b_spec, inputs=inputs,
                 fixed=fixed: ensure_costs(f"baseline-{base.name}", b_spec, fixed, roles["test"],
                                           run_dir, manifest, ex, inputs, progress))
        certificates = step("certificates", lambda: certify(cfg, run_dir, manifest,
                                                            matrices["cert"], matrices["test"]))
    finally:
        if own:
            ex.close()
    _save_timings(run_dir, seconds)
    return RunResult(run_dir=run_dir, certificates=certificates, seconds=seconds)


def _save_timings(run_dir: Path, seconds: dict[str, float]) -> None:
    """Append this invocation's step times (a resumed step shows only its remaining work)."""
    path = run_dir / TIMINGS_FILE
    history = json.loads(path.read_text()) if path.is_file() else []
    history.append({"finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "seconds": seconds})
    path.write_text(json.dumps(history, indent=2) + "\n")
