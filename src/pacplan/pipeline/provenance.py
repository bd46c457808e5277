"""A certificate checked against the run directory it lives in.

Inside a run directory (the certificate in <run>/ or <run>/certificates/), provenance that no
matrix can recompute — the prior and policies it came from, the world, the seed ranges — is
checked against manifest.json and the files it records. `verify_certificate` is `verify` with
this check: what the CLI's `verify` and `report` use.
"""

from __future__ import annotations

from pathlib import Path

from pacplan.config import load_config
from pacplan.errors import PacplanError
from pacplan.pacbayes.matrices import RATIONAL_SUFFIX
from pacplan.pacbayes.record import Certificate, Loaded, MatrixRef
from pacplan.pacbayes.schema import ProvenanceRecord
from pacplan.pacbayes.verify import folder_holding, verify
from pacplan.pipeline.rundir import Manifest, RunDir, identity


class RunDirProvenance:
    """The `ProvenanceCheck` of a run directory."""

    def vouches(self, path: Path) -> bool:
        return run_dir_of(path) is not None

    def problems(self, path: Path, loaded: Loaded) -> list[str]:
        run = run_dir_of(path)
        if run is None or loaded.provenance is None:  # nothing a run's manifest can vouch for
            return []
        return _check_against_run(run, loaded)

    def unchecked(self, path: Path, loaded: Loaded) -> list[str]:
        """Nothing: a run directory holds every file its certificate rests on."""
        return []


def verify_certificate(path: str | Path) -> Certificate:
    """`verify`, plus the run directory's checks when the certificate lives in one."""
    return verify(path, RunDirProvenance())


def run_dir_of(path: Path) -> Path | None:
    """The run directory holding this certificate (<run>/ or <run>/certificates/), if any."""
    return folder_holding(path, RunDir.MANIFEST)


def _short(digest: str | None) -> str:
    return "null" if digest is None else f"{str(digest)[:12]}…"


def _check_against_run(run: Path, loaded: Loaded) -> list[str]:
    """Provenance against manifest.json and the files it records (prior, policies, matrices)."""
    c, prov = loaded.certificate, loaded.provenance
    assert prov is not None
    manifest = Manifest(run)
    problems = _check_artifact(manifest, RunDir.PRIOR, "prior_sha256", prov.prior_sha256)
    problems += _check_artifact(manifest, RunDir.POLICIES, "policies_sha256",
                                prov.policies_sha256)
    drawn = manifest.inputs(RunDir.POLICIES)
    if drawn.get("prior") != prov.prior_sha256:
        problems.append(f"provenance.prior_sha256 is {_short(prov.prior_sha256)} but "
                        f"manifest.json records policies.npy drawn from prior "
                        f"{_short(drawn.get('prior'))}")
    problems += _check_prior_world(run, manifest, prov)
    if drawn.get("m") != c.m:
        problems.append(f"m is {c.m} but manifest.json records {drawn.get('m')!r} policies")
    cert_role = RunDir.cert_role(c.columns)
    problems += _check_matrix_inputs(run, manifest, cert_role, c.cert_matrix, prov, c.columns)
    if c.test_matrix is not None:
        problems += _check_matrix_inputs(run, manifest, "test", c.test_matrix, prov, c.columns)
    problems += _check_config(run, manifest, c, prov, old=loaded.record.content_sha256 is None)
    return problems


def _check_prior_world(run: Path, manifest: Manifest, prov: ProvenanceRecord) -> list[str]:
    """provenance.prior_world is what the run's prior file says it was trained in (a claim
    the file does not make is refused)."""
    if prov.prior_world is None or manifest.sha(RunDir.PRIOR) is None:
        return []
    from pacplan.pipeline.prior.prior_world import recorded_prior_world

    said = recorded_prior_world(run / RunDir.PRIOR, manifest.sha(RunDir.PRIOR))
    if said is None or identity(said) != identity(prov.prior_world.model_dump()):
        return [f"provenance.prior_world is not the world {RunDir.PRIOR} says it was trained "
                f"in ({'none' if said is None else said['name']})"]
    return []


def _check_artifact(manifest: Manifest, name: str, key: str, claimed: str | None) -> list[str]:
    """The provenance hash of `name` is the manifest's, and the file still has it."""
    recorded = manifest.sha(name)
    if recorded is None:
        return [f"{name} is not recorded in manifest.json, so provenance.{key} is unchecked"]
    if claimed != recorded:
        return [f"provenance.{key} is {_short(claimed)} but manifest.json records "
                f"{_short(recorded)} for {name}"]
    manifest.check(name)  # raises if the file changed or is missing
    return []


def _check_matrix_inputs(run: Path, manifest: Manifest, role: str, ref: MatrixRef,
                         prov: ProvenanceRecord, columns: list[int] | None) -> list[str]:
    """The run's matrix is the one referenced, made for these policies (a screened
    certificate's: its columns of them), world and seeds."""
    # the run's matrix, stored as .npy or as rational .safetensors (storage.cost_denominator)
    name = RunDir.costs(role, rational=Path(ref.path).suffix == RATIONAL_SUFFIX)
    key = f"{role}_matrix"
    problems = []
    if Path(ref.path) != (run / name).resolve():
        problems.append(f"{key}.path is {ref.path} but a run's certificate uses its {name}")
    if manifest.sha(name) != ref.sha256:
        problems.append(f"{key}.sha256 is {_short(ref.sha256)} but manifest.json records "
                        f"{_short(manifest.sha(name))} for {name}")
    made = manifest.inputs(name)
    if made.get("policies") != prov.policies_sha256:
        problems.append(f"provenance.policies_sha256 is {_short(prov.policies_sha256)} but "
                        f"manifest.json records {name} made for policies "
                        f"{_short(made.get('policies'))}")
    if identity(made.get("world")) != identity(prov.world.model_dump()):
        problems.append(f"provenance.world is not the world manifest.json records for {name}")
    if made.get("columns") != columns:
        problems.append(f"columns are {columns} but manifest.json records {name} computed for "
                        f"columns {made.get('columns')}")
    seeds, claimed = made.get("seeds"), getattr(prov.seeds, role.removesuffix("-screened"))
    ok = isinstance(seeds, list) and len(seeds) == 2 and claimed[0] == seeds[0] and (
        claimed[1] <= seeds[1] if role != "test" else claimed[1] == seeds[1])
    if not ok:
        problems.append(f"provenance.seeds.{role} is {claimed} but manifest.json records "
                        f"{name} computed on seeds {seeds!r}")
    return problems


def _check_config(run: Path, manifest: Manifest, c: Certificate, prov: ProvenanceRecord,
                  old: bool) -> list[str]:
    """The run's frozen config.yaml is evidence shipped beside the certificate, so it is
    checked: it must load (its seed ranges disjoint) and name the certificate's world, δ, test
    range and a certification range that starts where the certificate's does and holds its n
    seeds, and the policies (m, seed) manifest.json records. An unhashed (old) certificate's
    prior seeds are held to it too. (How the prior was trained, es: and the like, describes
    the prior.safetensors whose sha256 is checked; it is not re-run.)"""
    n = c.n
    try:
        cfg = load_config(run / RunDir.CONFIG)
    except PacplanError as exc:
        return [f"the run's {RunDir.CONFIG} does not hold ({exc})"]
    problems = []
    if identity(cfg.world.model_dump()) != identity(prov.world.model_dump()):
        problems.append(f"provenance.world is not the world of the run's {RunDir.CONFIG}")
    cert, test = list(cfg.seeds.cert), list(cfg.seeds.test)
    if cert[0] != prov.seeds.cert[0] or cert[0] + n > cert[1]:
        problems.append(f"provenance.seeds.cert is {prov.seeds.cert} but the run's "
                        f"{RunDir.CONFIG} says seeds.cert {cert}")
    if test != prov.seeds.test:
        problems.append(f"provenance.seeds.test is {prov.seeds.test} but the run's "
                        f"{RunDir.CONFIG} says seeds.test {test}")
    drawn = manifest.inputs(RunDir.POLICIES)
    if [cfg.policies.m, cfg.policies.seed] != [drawn.get("m"), drawn.get("seed")]:
        problems.append(f"the run's {RunDir.CONFIG} says policies m = {cfg.policies.m}, seed = "
                        f"{cfg.policies.seed} but manifest.json records policies.npy drawn with "
                        f"m = {drawn.get('m')!r}, seed = {drawn.get('seed')!r}")
    if cfg.certificate.delta != c.delta:
        problems.append(f"delta is {c.delta!r} but the run's {RunDir.CONFIG} says "
                        f"certificate.delta {cfg.certificate.delta!r}")
    made = manifest.inputs(RunDir.PRIOR)
    if made.get("seeds") is not None and made.get("seeds") != prov.seeds.prior:
        problems.append(f"provenance.seeds.prior is {prov.seeds.prior} but manifest.json "
                        f"records {RunDir.PRIOR} trained on seeds {made.get('seeds')}")
    prior = list(cfg.seeds.prior)
    if made.get("source") == "es" and prior != prov.seeds.prior:
        problems.append(f"provenance.seeds.prior is {prov.seeds.prior} but the run's "
                        f"{RunDir.CONFIG} trained the prior with ES on seeds.prior {prior}")
    elif old and prior != prov.seeds.prior:
        problems.append(f"provenance.seeds.prior is {prov.seeds.prior} but the run's "
                        f"{RunDir.CONFIG} says {prior}")
    return problems
