"""The front door for Python: certify costs, verify a certificate, run a config.

`pacplan.certify`, `pacplan.verify` and `pacplan.run` do what `pacplan certify-matrix`,
`pacplan verify` and `pacplan run` do, but take Python values (any array-like, a config dict)
and raise `PacplanError` whose messages name these functions' arguments (`clip=True`, `out`),
never a command-line flag the caller has no way to pass.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pacplan.choices import BOUND_CHOICES, SOLVERS
from pacplan.errors import NotCheckedWarning, PacplanError
from pacplan.pacbayes.matrices import CostMatrix, load_cost_matrix, sha256_array
from pacplan.pacbayes.record import Certificate
from pacplan.validation import (
    check_choice,
    check_delta,
    check_flag,
    check_real,
    check_unit_costs,
)

if TYPE_CHECKING:
    from pacplan.config import RunConfig
    from pacplan.pipeline.pipeline import RunResult

__all__ = ["Certificate", "certify", "run", "verify"]

PathLike = str | os.PathLike[str]

def certify(costs: Any, *, delta: float = 0.01, test: Any = None, bound: str = "best",
            clip: bool = False, solver: str = "gibbs") -> Certificate:
    """Certify the best posterior over the columns (policies) of a cost matrix.

    Args:
        costs: N × m costs in [0, 1], rows environments drawn i.i.d., columns policies fixed
            before those environments were drawn: any array-like (a numpy array, a list of
            lists, a DataFrame, a torch tensor, detached); a 1-D array is one policy. Or the
            path of a `.npy` file, which is recorded so that the saved certificate can be
            checked by `pacplan verify`.
        delta: the certificate holds with probability at least 1 − delta.
        test: optional held-out costs with the same m columns (array-like or `.npy` path);
            adds the posterior's test cost and its 99 % confidence interval.
        bound: the bound the posterior minimises: "best", "klinv", "quadratic" or "mcallester".
        clip: move costs outside [0, 1] into it (their number is recorded) instead of refusing.
        solver: "gibbs" (exact, fast) or "rep" (the paper's convex program).

    Returns:
        The certificate: `certified` is the bound on the expected cost, `p` the posterior.

    Raises:
        PacplanError: a cost that is NaN or outside [0, 1] (without `clip`), a shape that is
            not N × m, a `delta` outside (0, 1), an unknown `bound` or `solver`.
    """
    check_delta(check_real(delta, "delta"))
    check_choice("bound", bound, BOUND_CHOICES)
    check_choice("solver", solver, SOLVERS)
    check_flag(clip, "clip")
    cert = _cost_matrix(costs, "costs", bool(clip))
    test_m = None if test is None else _cost_matrix(test, "test", bool(clip))
    if test_m is not None and test_m.values.shape[1] != cert.values.shape[1]:
        raise PacplanError(f"test has {test_m.values.shape[1]} columns but costs has "
                           f"{cert.values.shape[1]}: the test matrix needs one column per "
                           "policy, in the same order")
    from pacplan.pacbayes.certificate import build_certificate

    return build_certificate(cert, float(delta), bound=bound, solver=solver, test=test_m)


def _cost_matrix(values: Any, name: str, clip: bool) -> CostMatrix:
    """An argument as a checked cost matrix: a `.npy` path (kept, for verify) or an array."""
    if isinstance(values, str | os.PathLike):
        return load_cost_matrix(values, clip=clip, name=f"{name} ({values})",
                                options=("rows", "clip=True"))
    try:
        arr = np.asarray(_detached(values))
    except (ValueError, TypeError, RuntimeError) as exc:  # ragged rows
        reason = " ".join(str(exc).split())
        raise PacplanError(f"{name}: not a matrix of numbers ({reason})") from None
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)  # N environments, one policy
    checked, clipped = check_unit_costs(arr, name, clip, clip_option="clip=True")
    return CostMatrix(values=checked, path=None, sha256=sha256_array(checked),
                      rows=checked.shape[0], clipped=clipped)


def _detached(values: Any) -> Any:
    """A torch tensor as a CPU numpy array: numpy refuses one that requires grad or lives on a
    GPU, but a tensor of costs is costs (torch is not imported here: the tensor brings it)."""
    if type(values).__module__.partition(".")[0] != "torch" or not hasattr(values, "detach"):
        return values
    tensor = values.detach().cpu()
    try:
        return tensor.numpy()
    except TypeError:  # a dtype numpy lacks (bfloat16): its values fit float64 exactly
        return tensor.double().numpy()


def verify(path: PathLike, *, strict: bool = False) -> Certificate:
    """Check a certificate file, or a planner directory made by `pacplan export`, as
    `pacplan verify` does: every number recomputed from the sha256-checked cost matrices, and
    inside a run directory or certify-policy folder its provenance too (a certify-policy
    certificate's recorded files re-hashed where they lie relative to its folder).

    Args:
        strict: raise when anything the certificate rests on could not be checked (a recorded
            file not found, a Python object no file holds); otherwise each is a
            `pacplan.NotCheckedWarning`.

    Returns:
        The verified certificate.

    Raises:
        PacplanError: the first thing that does not check, named in one line (a `path` that
            is not a path, too).
    """
    from pacplan.export.verify_any import verify_any

    if not isinstance(path, str | os.PathLike):
        raise PacplanError(f"path must be a certificate file or planner directory (a str or "
                           f"os.PathLike), got {type(path).__name__}")
    check_flag(strict, "strict")
    p = Path(path)
    verified = verify_any(p)
    if verified.unchecked and strict:
        raise PacplanError(f"{p}: {len(verified.unchecked)} of what it rests on could not be "
                           f"checked (strict): {verified.unchecked[0]}")
    for line in verified.unchecked:
        warnings.warn(f"{p}: not checked: {line}", NotCheckedWarning, stacklevel=2)
    return verified.certificate


def run(config: PathLike | Mapping[str, Any] | RunConfig, out: PathLike | None = None, *,
        prior: PathLike | None = None, progress: bool = True, report: bool = True,
        executor: str | None = None, workers: int | None = None,
        address: str | None = None) -> RunResult:
    """Run a config as `pacplan run` does: train the prior, draw the policies, compute the cost
    matrices, certify and (with `report`) write the report; a rerun resumes finished work.

    Args:
        config: a preset name (e.g. "toy-quick"), a YAML file, a dict of the same fields, or a
            `pacplan.config.RunConfig`.
        out: the run directory; by default runs/<name>.
        prior: a trained prior (.safetensors, or a shipped one by name) to use instead of
            training one.
        progress: show progress bars.
        report: write report.md, report.html and figures/ when the run is finished.
        executor: "serial", "processes" or "ray", overriding the config's.
        workers: worker processes, overriding the config's.
        address: a Ray cluster address (implies executor="ray").

    Returns:
        The run directory and its certificates by N (`result.certificates[n]`).

    Raises:
        PacplanError: a bad config, a run directory made by another config, or any other
            problem the caller can fix, in one line naming this function's arguments.
    """
    return _run(config, out, prior, progress, report, executor, workers, address)


def _run(config: Any, out: PathLike | None, prior: PathLike | None, progress: bool, report: bool,
         executor: str | None, workers: int | None, address: str | None) -> RunResult:
    from pacplan.pipeline.fresh import discard_if_refused
    from pacplan.pipeline.pipeline import run as run_pipeline
    from pacplan.pipeline.rundir import RunDir
    from pacplan.pipeline.start import PYTHON, start_run
    from pacplan.presets import resolve_prior
    from pacplan.report.document import write_report

    for name, flag in (("progress", progress), ("report", report)):
        check_flag(flag, name)
    for name, path in (("out", out), ("prior", prior)):
        if path is not None and not isinstance(path, str | os.PathLike):
            raise PacplanError(f"{name} must be a path (a str or os.PathLike), got "
                               f"{type(path).__name__}")
    cfg = _config(config)
    prior_file = resolve_prior(prior) if prior is not None else None
    given = Path(config) if isinstance(config, str | os.PathLike) else None
    run_dir = start_run(cfg, out, PYTHON, prior_file=prior_file, config_file=given,
                        executor=executor, workers=workers, address=address).run_dir
    # messages name the run directory `out`, as this function's caller spells it
    with discard_if_refused(run_dir), RunDir(run_dir, PYTHON.out).locked():
        result = run_pipeline(cfg, run_dir, prior_file=prior_file, progress=progress,
                              option=PYTHON.out)
        if report:
            write_report(run_dir)
    return result


def _config(config: Any) -> RunConfig:
    """A validated copy of `config`, whatever form it was given in."""
    from pacplan.config import RunConfig, load_config, parse_config
    from pacplan.presets import resolve_config

    if isinstance(config, RunConfig):
        return config.model_copy(deep=True)  # executor options must not change the caller's
    if isinstance(config, Mapping):
        return parse_config(dict(config), source="config")
    if isinstance(config, str | os.PathLike):
        return load_config(resolve_config(config))
    raise PacplanError(f"config must be a preset name, a YAML file path or a dict, got "
                       f"{type(config).__name__}")
