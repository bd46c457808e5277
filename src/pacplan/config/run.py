"""The YAML run configuration shared by every stage (prior training, policies, certificate).

Pydantic models with `extra="forbid"` so a typo is an error, not a silently ignored key, and
`strict=True` so `m: true` or `m: "5"` is not silently the number 1 or 5; every validation
problem is re-raised as one `PacplanError` line naming the file and the field (e.g. `es.lr_mu`).
The YAML itself is read with a safe loader that also refuses duplicate keys (the last one would
silently win) and anchors/aliases (a few lines can expand to gigabytes when the config is frozen).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
    StrictInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.types import Strict

from pacplan.choices import BOUND_CHOICES, EXECUTORS, SOLVERS
from pacplan.config.training import MAX_BATCH, DistillConfig, ESConfig, RngSeed, Section
from pacplan.errors import PacplanError, short
from pacplan.io.files import atomic_write_text
from pacplan.io.yamlio import read_yaml, yaml_text
from pacplan.validation import (
    check_int64_seed_range,
    check_safe_name,
    check_unique,
    overlapping_ranges,
)

SeedRange = Annotated[tuple[StrictInt, StrictInt], Strict(False)]
"""[start, stop): a YAML list of two integers (lax only in list-to-tuple, never in the ints)."""


def seed_range_size(r: SeedRange) -> int:
    """Number of seeds in the half-open range [start, stop)."""
    return r[1] - r[0]


class WorldConfig(Section):
    """Which world to build, and the keyword options passed to its factory."""

    name: str
    options: dict[str, Any] = Field(default_factory=dict)


class SeedsConfig(Section):
    """Disjoint half-open environment-seed ranges [start, stop) per role."""

    prior: SeedRange = (0, 10_000)
    cert: SeedRange = (1_000_000, 1_010_000)
    test: SeedRange = (2_000_000, 2_010_000)
    prior_eval: SeedRange | None = Field(
        None, description="held-out environments from the prior's distribution on which ES "
        "logs the cost of the prior's mean (es.eval_every); never trained on")

    @field_validator("prior", "cert", "test", "prior_eval")
    @classmethod
    def _int64_range(cls, v: SeedRange | None) -> SeedRange | None:
        return None if v is None else check_int64_seed_range(v, "seed range")

    @model_validator(mode="after")
    def _disjoint(self) -> SeedsConfig:
        roles = {"prior": self.prior, "cert": self.cert, "test": self.test}
        if self.prior_eval is not None:
            roles = {"prior": self.prior, "prior_eval": self.prior_eval, "cert": self.cert,
                     "test": self.test}
        overlaps = overlapping_ranges(roles)
        if overlaps:
            a, b = overlaps[0]
            (a0, a1), (b0, b1) = roles[a], roles[b]
            names = list(roles)
            raise ValueError(
                f"seed ranges overlap: {a} [{a0}, {a1}) and {b} [{b0}, {b1}); "
                f"{', '.join(names[:-1])} and {names[-1]} environments must be disjoint"
            )
        return self


class ExecutorConfig(Section):
    """Where rollouts run; results do not depend on `kind` or `workers`, only on chunk sizes."""

    kind: Literal[EXECUTORS] = "serial"  # type: ignore[valid-type]
    workers: int | None = Field(None, ge=1, description="None: all CPUs")
    address: str | None = Field(None, description="Ray cluster address; None starts Ray locally")
    chunk_policies: int = Field(64, ge=1)
    chunk_seeds: int = Field(8, ge=1)


class PoliciesConfig(Section):
    """The finite policy set drawn once from the prior."""

    m: int = Field(50, ge=1, le=MAX_BATCH)
    seed: RngSeed = 0


class ScreenConfig(Section):
    """Screening: every policy on the first `rows` certification environments, then only the
    `keep` policies of least cost there on the rest and on the test set. Each certificate's
    posterior lives on those `keep` (KL still against all m: valid, as PAC-Bayes holds for every
    posterior at once), for far fewer rollouts when rollouts are dear (docs/certificates.md)."""

    rows: int = Field(ge=1, description="certification environments every policy is run on")
    keep: int = Field(ge=1, description="policies kept: the least empirical cost on those rows")


class CertificateConfig(Section):
    """PAC-Bayes certificate settings; `n` lists the certification-set sizes N to report.

    `n` left out means one certificate on the whole `seeds.cert` range.
    """

    n: list[int] | None = None
    delta: float = Field(0.01, gt=0, lt=1)
    bound: Literal[BOUND_CHOICES] = "best"  # type: ignore[valid-type]
    solver: Literal[SOLVERS] = "gibbs"  # type: ignore[valid-type]
    screen: ScreenConfig | None = Field(None, description="run only the most promising policies "
                                        "beyond the first rows (a screened certificate)")

    @field_validator("n")
    @classmethod
    def _positive(cls, v: list[int] | None) -> list[int] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("needs at least one N")
        if any(x < 1 for x in v):
            raise ValueError("every N must be >= 1")
        return v


class BaselineConfig(Section):
    """A fixed policy evaluated on the test set beside the certified posterior (a report row).

    The world is rebuilt with `world_options` overriding the run's options (e.g. the UAV's
    `use_net: false` for the Depth-Filter-only planner) and flown with all-zero weights, or with
    the policy in `weights` (e.g. the quadruped's open-loop reference gait).
    """

    name: str
    world_options: dict[str, Any] = Field(default_factory=dict)
    weights: str | None = Field(None, description="a policy file (.safetensors or .npy) flown "
                                "instead of all-zero weights; relative to the config's folder")
    envs: int | None = Field(None, ge=1, description="fly it on the first `envs` test "
                             "environments only (a costly baseline, such as the look-ahead "
                             "teacher); its row and paired comparison use those")

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:  # it names costs/baseline-<name>.npy
        return check_safe_name(v, "baseline name")


class StorageConfig(Section):
    """How finished cost matrices are stored (never what they hold)."""

    cost_denominator: int | None = Field(
        None, ge=1, le=65_535, description="store costs/*.safetensors as integer numerators "
        "over this denominator (exact; the UAV's costs are multiples of 1/240); None: float64 "
        "costs/*.npy")


class ReportConfig(Section):
    """What `pacplan report` draws besides the table."""

    trajectories: int = Field(3, ge=0, description="test environments drawn with the posterior's "
                              "most likely policy")


class RunConfig(Section):
    """Everything that defines a run; a frozen copy is written to the run directory."""

    name: str = Field(description="names the run folder runs/<name> when --out is not given")
    world: WorldConfig
    seeds: SeedsConfig = Field(default_factory=SeedsConfig)
    es: ESConfig = Field(default_factory=ESConfig)
    distill: DistillConfig | None = Field(None, description="teach the net from a privileged "
                                          "teacher first; ES starts from the result")
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    policies: PoliciesConfig = Field(default_factory=PoliciesConfig)
    certificate: CertificateConfig = Field(default_factory=CertificateConfig)
    prior: str | None = Field(None, description="a trained prior (.safetensors) used instead of "
                              "ES training; a relative path is read from the config's folder")
    baselines: list[BaselineConfig] = Field(default_factory=list)
    report: ReportConfig = Field(default_factory=ReportConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    # set by `pacplan.pipeline.pipeline.check_worlds` at the boundary: which worlds and options it
    # checked, so the stages trust them instead of checking again (not part of the config file)
    _worlds_checked: str | None = PrivateAttr(default=None)
    _started: tuple[str, str | None] | None = PrivateAttr(default=None)

    def input_files(self) -> list[tuple[BaseModel, str]]:
        """Every field that names an input file, as (section, attribute): the one list that
        `load_config` reads relative to the config, the config identity blanks (a file's place
        never changes a result) and the shipped results' tests check."""
        slots: list[tuple[BaseModel, str]] = [(self, "prior"), (self.es, "init_mean"),
                                              (self.es, "init_var")]
        slots += [(base, "weights") for base in self.baselines]
        if self.distill is not None and self.distill.opening is not None:
            slots.append((self.distill.opening, "base"))
        return [(section, name) for section, name in slots
                if isinstance(getattr(section, name), str)]

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:  # runs/<name> must stay inside runs/
        return check_safe_name(v, "run name")

    @field_validator("baselines")
    @classmethod
    def _unique_baselines(cls, v: list[BaselineConfig]) -> list[BaselineConfig]:
        check_unique((b.name for b in v), "baseline name")
        return v

    @model_validator(mode="after")
    def _cross(self) -> RunConfig:
        if self.es.eval_every > 0:
            if self.seeds.prior_eval is None:
                raise ValueError("es.eval_every needs seeds.prior_eval, the held-out "
                                 "environments the prior's mean is evaluated on")
            n_eval = seed_range_size(self.seeds.prior_eval)
            if self.es.eval_envs > n_eval:
                raise ValueError(f"es.eval_envs {self.es.eval_envs} exceeds the {n_eval} seeds "
                                 f"of seeds.prior_eval {list(self.seeds.prior_eval)}")
        if self.distill is not None:
            self._check_distill()
        n_cert = seed_range_size(self.seeds.cert)
        if self.certificate.n is None:
            self.certificate.n = [n_cert]
        too_big = [n for n in self.certificate.n if n > n_cert]
        if too_big:
            raise ValueError(
                f"certificate.n {too_big} exceeds the {n_cert} seeds of "
                f"seeds.cert {list(self.seeds.cert)}"
            )
        if self.certificate.screen is not None:
            self._check_screen()
        n_test = seed_range_size(self.seeds.test)
        for base in self.baselines:
            if base.envs is not None and base.envs > n_test:
                raise ValueError(f"baseline {base.name!r}: envs {base.envs} exceeds the {n_test} "
                                 f"seeds of seeds.test {list(self.seeds.test)}")
        return self

    def _check_screen(self) -> None:
        """A screen that would keep every policy, outrun the certificates' rows or meet the
        rep solver is refused, naming the field."""
        screen, cert = self.certificate.screen, self.certificate
        assert screen is not None and cert.n is not None
        if screen.keep >= self.policies.m:
            raise ValueError(f"certificate.screen.keep {screen.keep} is not below policies.m "
                             f"{self.policies.m}: it would keep every policy (leave screen out)")
        if screen.rows > max(cert.n):
            raise ValueError(f"certificate.screen.rows {screen.rows} exceeds the largest "
                             f"certificate.n {max(cert.n)}")
        if cert.solver != "gibbs":
            raise ValueError(f"certificate.screen needs solver gibbs, not {cert.solver}: the "
                             "paper's relative-entropy program optimizes over all m policies")


    def _check_distill(self) -> None:
        """What distillation would silently clamp or ignore: more held-out environments than
        seeds.prior_eval holds, and an es.init_mean (the distilled net is where ES starts)."""
        assert self.distill is not None
        # the opening teacher counts its held-out terrains itself (distill.opening)
        if (self.distill.eval_envs and self.seeds.prior_eval is not None
                and self.distill.opening is None):
            n_eval = seed_range_size(self.seeds.prior_eval)
            if self.distill.eval_envs > n_eval:
                raise ValueError(f"distill.eval_envs {self.distill.eval_envs} exceeds the "
                                 f"{n_eval} seeds of seeds.prior_eval "
                                 f"{list(self.seeds.prior_eval)}")
        if isinstance(self.es.init_mean, str | list):
            raise ValueError("es.init_mean is never used with a distill section (the distilled "
                             "net is where ES starts): remove one of them")


def _format_error(exc: ValidationError, source: str) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"].endswith(("_type", "_parsing")):  # show what was given instead
            msg += f", got {short(err.get('input'))}"
        parts.append(f"{loc}: {msg}")
    return f"{source}: invalid config: " + "; ".join(parts)


def parse_config(data: Any, source: str = "config") -> RunConfig:
    """Validate a mapping (e.g. parsed YAML) into a `RunConfig`, or raise `PacplanError`."""
    if not isinstance(data, dict):
        raise PacplanError(
            f"{source}: the config must be a mapping of fields, got {type(data).__name__}"
        )
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        raise PacplanError(_format_error(exc, source)) from None


def load_config(path: str | Path) -> RunConfig:
    """Read and validate a YAML config (safe loader: no Python objects are ever constructed)."""
    p = Path(path)
    if not p.is_file():
        raise PacplanError(f"config file not found: {p}")
    return files_read_from(parse_config(read_yaml(p), source=str(p)), p.parent)


def files_read_from(cfg: RunConfig, folder: Path) -> RunConfig:
    """`cfg` with each relative input file made absolute from `folder` (a config's files are
    its neighbours); changed in place and returned."""
    for section, name in cfg.input_files():
        value = getattr(section, name)
        if not Path(value).is_absolute():
            setattr(section, name, str((folder / value).resolve()))
    return cfg


def config_to_dict(cfg: RunConfig) -> dict[str, Any]:
    """Plain JSON/YAML-ready dict (tuples become lists)."""
    return cfg.model_dump(mode="json")


def dump_config(cfg: RunConfig, path: str | Path) -> None:
    """Write the config as YAML that `load_config` reads back to an equal `RunConfig`."""
    atomic_write_text(path, yaml_text(config_to_dict(cfg)))
