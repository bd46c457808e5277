"""The report's section on the prior: where it came from, what it was trained on, and how the
training went (for people: metrics are labelled as unhashed where they are).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pacplan
from pacplan.config import RunConfig
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import read_prior
from pacplan.io import paperdata
from pacplan.io.files import (
    atomic_write_bytes,
    read_file_bytes,
    safetensors_metadata,
    sha256_file,
)
from pacplan.pacbayes.record import relative_path
from pacplan.pipeline.execution.progress import duration
from pacplan.pipeline.prior.curve import plot_training_curve
from pacplan.pipeline.rundir import Manifest, RunDir
from pacplan.presets import shipped_priors
from pacplan.report.markdown import code, text
from pacplan.validation import is_int

_PAPERS = ("the paper's published Minitaur prior (`{command}` writes these bytes; this run "
           "read it from {source})")
_METRIC_KEYS = ("iteration", "cost", "best", "sigma_mean", "utility")
_NUMBER_KEYS = ("iteration", "cost", "best", "sigma_mean", "cost_ema", "eval_cost")
"""Fields the summary formats and the curve plots: numbers where present (not bools)."""


def _is_record(r: Any) -> bool:
    return isinstance(r, dict) and all(k in r for k in _METRIC_KEYS) and all(
        isinstance(r[k], int | float) and not isinstance(r[k], bool)
        for k in _NUMBER_KEYS if k in r)


def _read_training_metrics(path: Path) -> tuple[list[dict[str, Any]], str | None]:
    """ES metrics records (for people, not hash-checked), or [] and why they cannot be used
    (Markdown: the file's name written as text, since it comes from outside). Read as
    `read_file_bytes` reads: a FIFO there is named, not waited on (the report hung)."""
    try:
        records = [json.loads(line) for line
                   in read_file_bytes(path).decode("utf-8").splitlines() if line.strip()]
    except (PacplanError, ValueError, RecursionError) as exc:
        return [], f"{text(path.name)} is unreadable ({type(exc).__name__})"
    if records and all(isinstance(r, dict) and type(r.get("round")) is int for r in records):
        return [], f"{text(path.name)} lists teaching rounds (below), no ES iterations"
    if not records or not all(_is_record(r) for r in records):
        return [], f"{text(path.name)} holds no ES metrics records"
    return records, None


def _es_record_summary(records: list[dict[str, Any]], meta: dict[str, str]) -> str:
    """One paragraph from ES metrics records: sizes, rollouts, time, cost first/last/lowest."""
    n, last = len(records), records[-1]
    envs = last.get("envs")
    rollouts = last.get("rollouts")
    sizes = f"{n} iterations"
    if isinstance(envs, int) and isinstance(rollouts, int) and envs > 0:
        sizes += f" × {envs} environments × {rollouts // (2 * envs)} antithetic pairs"
    total = sum(r.get("rollouts", 0) for r in records if isinstance(r.get("rollouts"), int))
    seconds = sum(float(r["seconds"]) for r in records
                  if isinstance(r.get("seconds"), int | float) and math.isfinite(r["seconds"]))
    lowest = min(r["cost"] for r in records)
    how = ("importance-weighted mean over an iteration's perturbed policies and stratified "
           "environments" if "cost_plain" in last else "mean over an iteration's perturbed "
           "policies")
    summary = (f"{sizes}: {total:,} rollouts in {duration(seconds)} of ES time. Training cost "
               f"({how}) {records[0]['cost']:.3f} at the "
               f"first iteration, {last['cost']:.3f} at the last, lowest {lowest:.3f}.")
    recorded = meta.get("iteration")  # the prior's metadata: any string
    if recorded is not None:
        summary += (f" The prior records {recorded} iterations, as many as the metrics."
                    if recorded == str(n) else
                    f" The prior records {text(recorded)} iterations, the metrics {n}: they may "
                    "not belong together.")
    return summary


def _find_source(rd: RunDir, source: str, sha: str) -> Path | None:
    """The file a given prior was copied from, if it is still found with the same sha256: at
    its recorded path (relative to the run directory, or, for older manifests, the current
    directory), or shipped inside the pacplan package under the same name or, renamed since
    (0.2.0 renamed the UAV's), as a shipped prior with the same sha256."""
    raw = Path(source)
    candidates = [raw] if raw.is_absolute() else [rd.path / raw, Path.cwd() / raw]
    # by name, not as a glob pattern: a name may hold '*', '?' or '[' ('**' is no pattern)
    candidates += sorted(p for p in Path(pacplan.__file__).parent.rglob("*") if p.name == raw.name)
    if raw.suffix == ".safetensors":
        candidates += list(shipped_priors().values())
    for path in candidates:
        if path.is_file() and sha256_file(path) == sha:
            return path
    return None


def _shipped(found: Path | None) -> str | None:
    """A prior shipped inside the pacplan package, named as such: not a path into one
    checkout's source tree (`../../src/pacplan/presets/…`) that means nothing to a reader."""
    package = Path(pacplan.__file__).resolve().parent
    if found is None or not found.resolve().is_relative_to(package):
        return None
    inside = found.resolve().relative_to(package).as_posix()
    return f"the shipped prior {code(found.stem)} ({code(f'pacplan/{inside}')} in the package)"


def _siblings(found: Path, *names: str) -> Path | None:
    """The first of `names` that exists beside `found` ({stem} is the prior file's stem)."""
    for name in names:
        path = found.parent / name.format(stem=found.stem)
        if path.is_file():
            return path
    return None


def prior_section(rd: RunDir, manifest: Manifest, cfg: RunConfig) -> list[str]:
    """## The prior: where it came from (trained here, or a given file with its source and
    sha256), the seeds it records, and its training record and curve where one exists."""
    path = manifest.checked_path(RunDir.PRIOR)
    if path is None:
        raise PacplanError(f"{rd.path} has no {RunDir.PRIOR}; run `pacplan run` first")
    data = path.read_bytes()
    prior = read_prior(data, f"{RunDir.PRIOR} in {rd.path}")
    meta = safetensors_metadata(data)
    sha = manifest.sha(RunDir.PRIOR) or ""
    source = manifest.inputs(RunDir.PRIOR).get("source")
    seeds = (f"it records its training seeds [{prior.seeds[0]}, {prior.seeds[1]})"
             if prior.seeds is not None else
             "it records no training seeds, so the certificates state the config's seeds.prior "
             f"{list(cfg.seeds.prior)} (the run's own claim)")
    what = f"N(μ, diag σ²) over {prior.mu.size:,} weights, sha256 {code(sha)}"
    lines = ["## The prior", ""]
    curve = rd / RunDir.TRAINING_CURVE
    records: list[dict[str, Any]] = []
    copied = False
    found: Path | None = None
    if source == "es":
        es = cfg.es
        shared = (" (one set of pairs shared by all its environments)"
                  if es.shared_perturbations else "")
        start = (f"mean from {code(Path(es.init_mean).name)}" if isinstance(es.init_mean, str)
                 else f"mean {es.init_mean:g}")
        variance = (f"per weight from {code(Path(es.init_var).name)}"
                    if isinstance(es.init_var, str) else f"{es.init_var:g}")
        lines += [f"Trained in this run by Evolution Strategies: `{RunDir.PRIOR}` ({what}); "
                  f"{seeds}.", "",
                  f"ES settings (config.yaml): {es.iterations} iterations × {es.envs_per_iter} "
                  f"environments × {es.pairs_per_env} antithetic pairs per iteration"
                  f"{shared}, Adam with learning rates {es.lr_mu:g} (μ) and {es.lr_logvar:g} "
                  f"(log σ²), starting from {start} and variance {variance}.", ""]
        records, problem = _read_training_metrics(rd / RunDir.METRICS)
        lines += [f"From `{RunDir.METRICS}`: {_es_record_summary(records, meta)}" if records
                  else f"No training record: {problem}.", ""]
    else:
        found = None if source is None else _find_source(rd, str(source), sha)
        shipped_name = _shipped(found)
        papers = sha == paperdata.MINITAUR_PRIOR_SHA256
        if shipped_name is not None:
            shown = shipped_name
        elif papers:
            shown = _PAPERS.format(command=paperdata.restore_command(Path("OUT")),
                                   source=code(source))
        else:
            shown = code(source)
        lines += [f"Given as a file (`--prior` or `prior:` in the config): source {shown}, "
                  f"copied into the run as `{RunDir.PRIOR}` ({what}); {seeds}.", ""]
        if papers and found is None:
            lines += ["Trained by the paper's authors; the paper's published files hold no "
                      "training record of it, so none is shown.", ""]
        elif found is None:
            lines += ["The source file is not found with this sha256 (at its recorded path, "
                      "or shipped with pacplan), so no training record is shown.", ""]
        else:
            where = relative_path(found, rd.path)
            metrics = _siblings(found, "{stem}-metrics.jsonl",
                                *([RunDir.METRICS] if found.name == RunDir.PRIOR else []))
            config = _siblings(found, "{stem}-prior.yaml",
                               *([RunDir.CONFIG] if found.name == RunDir.PRIOR else []))
            shipped = _siblings(found, "{stem}-training.png",
                                *([RunDir.TRAINING_CURVE] if found.name == RunDir.PRIOR else []))
            problem = "none lies beside it"
            if metrics is not None:
                records, problem = _read_training_metrics(metrics)
            found_at = "" if where == source or shipped_name else f" (found at {code(where)})"
            how = f"; how it was trained: {code(config.name)}" if config is not None else ""
            if records:
                lines += [f"Its training record beside the source{found_at}, {code(metrics.name)} "
                          f"(for people: not hash-linked to the prior{how}): "
                          f"{_es_record_summary(records, meta)}", ""]
            elif shipped is not None:
                atomic_write_bytes(curve, shipped.read_bytes())
                copied = True
                lines += [f"Its training figure beside the source{found_at}: "
                          f"{code(shipped.name)} (for people: not hash-linked to the "
                          f"prior{how}); no ES metrics record ({problem}).", ""]
            else:
                lines += [f"No training record beside the source{found_at} ({problem}{how}).",
                          ""]
    if records:
        plot_training_curve(records, curve)
    if records or (source == "es" and curve.is_file()):
        lines += [f"![ES training curve of the prior]({RunDir.TRAINING_CURVE})", ""]
    elif copied:  # a figure shipped beside the prior: an ES curve or a taught net's rounds
        lines += [f"![The prior's training figure]({RunDir.TRAINING_CURVE})", ""]
    lines += _taught(meta, found, rd) + _narrowed(meta) + _trained_in(prior.world, cfg)
    return lines


def _trained_in(world: dict[str, Any] | None, cfg: RunConfig) -> list[str]:
    """Where the prior file says it was trained, and whether that makes this a transfer."""
    if world is None:
        return []
    from pacplan.config import config_to_dict
    from pacplan.pipeline.prior.prior_world import transfer_note

    said = ", ".join(f"{k}: {v}" for k, v in sorted(world["options"].items()))
    line = f"It was trained in world {code(world['name'])} ({said or 'default options'})"
    note = transfer_note(world, config_to_dict(cfg)["world"])
    if note is None:
        return [line + ", the world certified here.", ""]
    return [line + ": **a transfer experiment** — " + note.removeprefix("transfer: ") + ".", ""]


def _narrowed(meta: dict[str, str]) -> list[str]:
    """Where the prior file's σ is ES's σ scaled down (metadata `sigma_scale`, written by the
    ES setting `prior_sigma_scale`): said, since the training curve's σ is not the file's."""
    if "sigma_scale" not in meta:
        return []
    try:
        scale = float(meta["sigma_scale"])
    except ValueError:
        scale = math.nan
    if not (math.isfinite(scale) and 0 < scale <= 1):
        return ["The prior's `sigma_scale` metadata is unreadable.", ""]
    return [f"Its σ is the σ ES trained times {scale:g} (metadata `sigma_scale`, the ES setting "
            "`prior_sigma_scale`): the policies drawn stay nearer the trained mean.", ""]


def _distill_summary(meta: dict[str, str]) -> dict[str, Any] | None:
    """The prior's `distill` metadata as one summary (`pacplan.pipeline.prior.distill.summary`),
    checked; None when unreadable. A record listing every round (`rounds` a list, as the
    climbing-opening student's, taught before its teacher was a distillation stage) is read
    as its chosen round's summary."""
    try:
        d = json.loads(meta["distill"])
        if isinstance(d.get("rounds"), list):
            used = d["rounds"][d["chosen_round"]]
            d = {**d, "rounds": len(d["rounds"]) - 1, "states": used.get("states"),
                 "eval_cost": used.get("eval_cost"), "eval_envs": used.get("eval_envs")}
        seeds, rounds, states = d["seeds"], d["rounds"], d.get("states")
        eval_cost, eval_envs = d.get("eval_cost"), d.get("eval_envs")
        ok = (isinstance(seeds, list) and len(seeds) == 2 and all(is_int(x) for x in seeds)
              and is_int(rounds) and (states is None or is_int(states))
              and (eval_cost is None or (isinstance(eval_cost, int | float)
                                         and not isinstance(eval_cost, bool)
                                         and math.isfinite(eval_cost)
                                         and (eval_envs is None or is_int(eval_envs))))
              and isinstance(d.get("base_sha256", ""), str))
    except (ValueError, KeyError, TypeError, IndexError, RecursionError):
        ok = False
    return d if ok else None


def _taught(meta: dict[str, str], found: Path | None, rd: RunDir) -> list[str]:
    """Where the prior's mean is, or its ES started from, a net taught by a privileged teacher
    (metadata `distill`, `pacplan.pipeline.prior.distill`): what taught it (from which prior,
    when it refined one), and the cost-per-stage figure shipped beside the source
    ({stem}-stages.png) or already in the run's figures/, if any."""
    if "distill" not in meta:
        return []
    d = _distill_summary(meta)
    if d is None:  # the prior's own metadata, but any prior may be given: checked before shown
        return ["The prior's `distill` metadata is unreadable.", ""]
    seeds, rounds, states, eval_cost = d["seeds"], d["rounds"], d.get("states"), d.get("eval_cost")
    on = "" if d.get("eval_envs") is None else f" {d['eval_envs']}"
    held = (f"; the taught net's held-out cost {100 * eval_cost:.2f} % on{on} prior_eval "
            "environments" if eval_cost is not None else "")
    base = d.get("base_sha256")
    what = ("Its mean is a taught net, with no ES after it" if meta.get("iteration") == "0"
            else "Its ES started from a taught net")
    lines = [f"{what} (metadata `distill`): {text(d.get('teacher', '?'))} labelled "
             f"prior-training environments [{seeds[0]}, {seeds[1]})"
             f"{'' if base is None else f', refining the prior with sha256 {code(base)}'}; "
             f"behaviour cloning then {rounds} DAgger rounds"
             f"{'' if states is None else f' on {states:,} states'}{held}.", ""]
    figure = None if found is None else _siblings(found, "{stem}-stages.png")
    target = rd / "figures" / "prior_stages.png"
    where = None
    if figure is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, figure.read_bytes())
        where = f"{code(figure.name)} beside the source"
    elif target.is_file():  # drawn into the run directory (benchmarks/uav_taught_eval.py)
        where = "`figures/prior_stages.png` in the run directory"
    if where is not None:
        lines += [f"Cost per stage on held-out environments ({where}, for people: not "
                  "hash-linked to the prior):", "", "![Cost per stage](figures/prior_stages.png)",
                  ""]
    return lines


# ------------------------------------------------------------------------- trajectories
