"""The prior-training sections of a run configuration (`es:`, `distill:`), and the strict base
every section shares: `pacplan.config` builds the whole config from them."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pacplan.validation import INT64_MAX


class Section(BaseModel):
    """A config section: an unknown key is an error, and no value is coerced."""

    model_config = ConfigDict(extra="forbid", frozen=False, strict=True)


RngSeed = Annotated[int, Field(ge=0, le=INT64_MAX)]
MAX_BATCH = 10_000_000
"""At most this many policies, ES pairs or environments per iteration: each is an array row
(a larger count overflows an allocation, never a useful run)."""


class StratumConfig(Section):
    """One terrain stratum over-drawn by ES (`pacplan.es.strata`)."""

    share: float = Field(gt=0, lt=1, description="fraction of each iteration's environments "
                         "drawn from this stratum (their costs are importance-weighted)")


class ESConfig(Section):
    """Evolution Strategies on N(mu, diag exp(logvar)); see `pacplan.es.algorithm`."""

    iterations: int = Field(200, ge=0, le=INT64_MAX, description="ES iterations (0: the prior "
                            "is the start, init_mean and init_var, e.g. a net a distill section "
                            "taught with a prior's σ)")
    envs_per_iter: int = Field(16, ge=1, le=MAX_BATCH,
                               description="environments drawn per iteration")
    pairs_per_env: int = Field(8, ge=1, le=MAX_BATCH,
                               description="antithetic pairs per environment (m-hat)")
    lr_mu: float = Field(0.05, gt=0)
    lr_logvar: float = Field(0.05, gt=0)
    init_mean: float | list[float] | str = Field(
        0.0, description="initial mean: one value for every weight, a list of them, or a weights "
        "file (.safetensors or .npy, relative to the config file), e.g. a policy to start from")
    init_var: float | str = Field(
        4.0, description="initial variance: one value for every weight, or a file of one per "
        "weight (.safetensors or .npy, relative to the config file), e.g. scaled to each "
        "weight's input so that every input perturbs the output alike")
    logvar_min: float = -12.0
    logvar_max: float = 6.0
    utility_patience: int = Field(10, ge=1, description="iterations without improvement before "
                                  "rank-utility shaping switches on")
    min_improvement: float = Field(0.0, ge=0, description="a drop in training cost counts as "
                                   "improvement only when larger than this")
    adam_beta1: float = Field(0.9, ge=0, lt=1)
    adam_beta2: float = Field(0.999, ge=0, lt=1)
    adam_eps: float = Field(1e-8, gt=0)
    seed: RngSeed = 0
    shared_perturbations: bool = Field(False, description="fly one set of pairs on every "
                                       "environment of an iteration (batches in one matrix)")
    utility_criterion: Literal["iteration", "ema"] = Field(
        "iteration", description="what rank-utility shaping watches for improvement: each "
        "iteration's training cost (the paper's scheme) or its exponential moving average, "
        "which large noisy batches need")
    ema_decay: float = Field(0.9, ge=0, lt=1, description="weight of the past in the moving "
                             "average of the training cost (utility_criterion: ema)")
    lr_schedule: Literal["constant", "cosine"] = Field(
        "constant", description="learning rates held, or decayed along a half cosine from "
        "lr_mu / lr_logvar at the first iteration to lr_final_fraction of them at the last")
    lr_final_fraction: float = Field(0.1, gt=0, le=1)
    eval_every: int = Field(0, ge=0, description="every this many iterations, fly the prior's "
                            "mean on the first eval_envs seeds of seeds.prior_eval and log its "
                            "cost (0: never); logged only, it never steers the iterates")
    eval_envs: int = Field(200, ge=1)
    prior_sigma_scale: float = Field(
        1.0, gt=0, le=1, description="the prior file's σ is ES's σ times this (ES never sees "
        "it): below 1 the policies drawn stay nearer the trained mean, worth it when ES's σ is "
        "wider than the basin its mean found; choose it on held-out prior-side terrains only")
    strata: dict[str, StratumConfig] | None = Field(
        None, description="over-draw strata the world names (e.g. the quadruped's steep: "
        "{share: 0.333}): each iteration draws that share of its environments from the stratum "
        "and the rest from seeds in no stratum, and weights each cost by the stratum's true "
        "probability over its drawn share, so the objective stays the world's expected cost")

    @model_validator(mode="after")
    def _bounds(self) -> ESConfig:
        if self.logvar_min >= self.logvar_max:
            raise ValueError("logvar_min must be below logvar_max")
        if not isinstance(self.init_var, str) and not self.init_var > 0:
            raise ValueError(f"init_var must be > 0, got {self.init_var:g}")
        if self.strata is not None:
            total = sum(s.share for s in self.strata.values())
            if not self.strata:
                raise ValueError("strata: name at least one stratum, or leave strata out")
            if total >= 1:
                raise ValueError(f"strata: the shares sum to {total:g}; they must sum below 1 "
                                 "to leave room for environments in no stratum")
        return self


class OpeningConfig(Section):
    """The climbing-opening teacher's settings (`distill.teacher: quadruped-opening`,
    `pacplan.pipeline.prior.distill_opening`): it refines a prior already trained."""

    base: str = Field(description="the prior file the student starts from and is pulled "
                      "towards, and whose own output the teacher keeps away from the opening "
                      "(relative to the config file)")
    steep: int = Field(400, ge=1, le=MAX_BATCH, description="teaching terrains in the world's "
                       "steep stratum: the first of seeds.prior")
    ordinary: int = Field(300, ge=0, le=MAX_BATCH, description="teaching terrains outside it: "
                          "the first of seeds.prior")
    eval_steep: int = Field(40, ge=1, le=MAX_BATCH, description="held-out steep terrains (the "
                            "first of seeds.prior_eval) on which the round is chosen")
    eval_ordinary: int = Field(80, ge=1, le=MAX_BATCH, description="held-out terrains outside "
                               "the stratum (the first of seeds.prior_eval) likewise")
    pull: float = Field(1e-4, ge=0, description="weight of the squared distance to the base "
                        "weights (standardised) in each round's fit")
    opening_weight: float = Field(3.0, gt=0, description="weight of an opening state in the "
                                  "fit (every other state weighs 1)")
    iterations: int = Field(500, ge=1, description="L-BFGS iterations of each round's fit")


class DistillConfig(Section):
    """Teach the policy net from a privileged teacher before ES
    (`pacplan.pipeline.prior.distill`)."""

    envs: int = Field(640, ge=1, description="prior-training environments the teacher solves "
                      "(the first of seeds.prior)")
    rounds: int = Field(3, ge=0, description="DAgger rounds after the first behaviour cloning")
    free_states: int = Field(24, ge=0, description="random collision-free reachable states per "
                             "environment added in the first round")
    epochs: int = Field(8, ge=1)
    lr: float = Field(3e-3, gt=0)
    batch: int = Field(256, ge=1)
    temperature: float = Field(1.0, gt=0, description="metres: the policy's scores over this "
                               "are its logits")
    target_temperature: float = Field(0.1, gt=0, description="the teacher's values over this "
                                      "are its logits (UAV: −10·cost + clearance in m; "
                                      "quadruped: look-ahead score in m)")
    clear_cap: float = Field(0.75, gt=0, description="clearance (m) beyond which the teacher "
                             "does not prefer more")
    eval_envs: int = Field(500, ge=0, description="held-out seeds.prior_eval environments the "
                           "student is flown on after each round (logged only)")
    workers: int = Field(2, ge=1, description="processes solving the teacher's lattices")
    seed: RngSeed = 0
    teacher: str | None = Field(None, description="the privileged teacher (left out: the "
                                "world's own; a world may have several, pacplan.worlds.base "
                                "TEACHERS)")
    opening: OpeningConfig | None = Field(None, description="the climbing-opening teacher's "
                                          "settings (teacher: quadruped-opening)")

    def changed(self, names: tuple[str, ...]) -> list[str]:
        """Those of `names` set to other than their default, sorted: a teacher refuses another
        teacher's settings so, since a frozen config.yaml (a resume) states every setting, at
        its default when it was not given."""
        return sorted(k for k in set(names) & self.model_fields_set
                      if getattr(self, k) != type(self).model_fields[k].default)
