"""Where a run starts, for `pacplan run`, `pacplan train-prior` and `pacplan.run` alike.

Before any work: the executor options given beside the config are applied and checked, the
prior file's policy family is adopted (`adopt_prior_options`), every world the config will
build is checked (`check_worlds`) and the output folder is checked (`refuse_overwriting`);
each once. Messages name the caller's own spelling of each argument (`--out` on the command
line, `out` in Python), passed in as a `Spelling`, not reworded afterwards; the run directory
carries its own (`RunDir.option`) into the pipeline's messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pacplan.choices import EXECUTORS
from pacplan.config import RunConfig
from pacplan.errors import PacplanError
from pacplan.io.outputs import refuse_overwriting
from pacplan.pipeline.pipeline import check_worlds, started_key
from pacplan.pipeline.prior.prior_world import adopt_prior_options, prior_source
from pacplan.validation import check_choice, check_int


@dataclass(frozen=True)
class Spelling:
    """How a caller names each input of a run (the command line's flags, Python's keywords)."""

    out: str
    prior: str
    config: str
    executor: str
    workers: str
    address: str


CLI = Spelling("--out", "--prior", "CONFIG", "--executor", "--workers", "--address")
PYTHON = Spelling("out", "prior", "config", "executor", "workers", "address")


@dataclass(frozen=True)
class StartedRun:
    """A run checked and ready (its config changed in place): its folder and what the prior's
    file set on the world options (a sentence for the log), if anything."""

    run_dir: Path
    adopted: str | None


def start_run(cfg: RunConfig, out: str | Path | None, spelling: Spelling, *,
              prior_file: Path | None = None, config_file: Path | None = None,
              executor: str | None = None, workers: int | None = None,
              address: str | None = None, adopt_prior: bool = True) -> StartedRun:
    """Check everything a run (or `train-prior`, `adopt_prior=False`: it trains the prior)
    needs before its folder is made; `cfg` is changed in place. Raises PacplanError naming
    the input in `spelling`."""
    apply_executor_options(cfg, spelling, executor, workers, address)
    run_dir = Path(out) if out is not None else Path("runs") / cfg.name
    adopted = None
    if adopt_prior:
        adopted = adopt_prior_options(cfg, prior_source(cfg, prior_file, run_dir))
    check_worlds(cfg)  # before the run directory is made
    # not into a planner, another run, a folder of other files or one holding an input
    refuse_overwriting(run_dir, spelling.out,
                       {spelling.prior: prior_file, spelling.config: config_file}, resumes=True)
    cfg._started = started_key(run_dir, prior_file)
    return StartedRun(run_dir, adopted)


def apply_executor_options(cfg: RunConfig, spelling: Spelling, executor: str | None,
                           workers: int | None, address: str | None) -> None:
    """Where rollouts run, given beside the config (never changes a result)."""
    if executor is not None:
        cfg.executor.kind = check_choice(spelling.executor, executor, EXECUTORS)
    if workers is not None:
        cfg.executor.workers = check_int(workers, spelling.workers, minimum=1)
    if address is not None:  # a cluster address only means something to Ray
        if not isinstance(address, str):
            raise PacplanError(f"{spelling.address} must be a Ray cluster address (a str), got "
                               f"{type(address).__name__}")
        cfg.executor.address = address
        cfg.executor.kind = "ray"
