"""The distillation stage of `pacplan train-prior`: teach the policy net from a privileged
teacher on prior seeds, then let ES start from what it learnt.

Rounds, each written to `distill/` in the run directory before the next starts, so a killed
run resumes at the first unfinished round and reproduces every weight to the bit (each
teacher's module says what a round is: `distill_uav`, `distill_quadruped`, `distill_opening`);
- `distill/theta.safetensors`: the result, which initialises the ES mean; `distill/record.json`
  summarises the stage (seeds, sizes, times, held-out costs) and goes into the prior's metadata.

Every checkpoint (a teacher's labels, a round's weights, θ) is written atomically, then
listed with its sha256 in `distill/ledger.jsonl` (`pacplan.pipeline.execution.chunks.Ledger`, as a
cost matrix's chunks are), and read only once checked: what a kill leaves (a file not yet listed, a
torn last line of the ledger or of rounds.jsonl) is recomputed silently, to the same bytes; a
listed file whose bytes changed (an edit) is refused, naming it. A round is trusted only as a
chain: the first round not finished and every round after it are recomputed. A round's log
record lives in its weights file, so rounds.jsonl is for people only. The folder is stamped
(inputs.json) with what the result depends on; other settings are refused, not mixed in.

The teacher sees only seeds.prior; the stage refuses, before any work, a world the teacher does
not support or teacher seeds overlapping seeds.cert / seeds.test. The teacher is the world's own
(`pacplan.worlds.base.world_teacher`) or the one distill.teacher names among the world's: the
quadruped's look-ahead (`distill_quadruped`) or its climbing opening, which refines a prior
already trained (`distill_opening`).
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from pacplan.config import DistillConfig, RunConfig
from pacplan.errors import PacplanError
from pacplan.io.files import atomic_write_json, safetensors_bytes, safetensors_metadata
from pacplan.pipeline.execution.chunks import ChunkStore, Ledger
from pacplan.pipeline.prior import distill_opening, distill_uav
from pacplan.pipeline.prior.distill_quadruped import FILES as QUADRUPED_FILES
from pacplan.pipeline.prior.distill_store import LOG, mend_log
from pacplan.pipeline.rundir import RunDir, identity
from pacplan.worlds.base import world_teacher

DIR = "distill"
THETA = "theta.safetensors"
RECORD = "record.json"
STAMP = "inputs.json"
_FILES = re.compile("|".join([r"round-\d+\.safetensors|theta\.safetensors", distill_uav.FILES,
                              QUADRUPED_FILES, distill_opening.FILES]))


def teacher_seeds(cfg: RunConfig) -> tuple[int, int]:
    """The prior-training environments the teacher solves: the first distill.envs of seeds.prior
    (the opening teacher chooses its own among all of seeds.prior)."""
    d = _cfg(cfg)
    start = int(cfg.seeds.prior[0])
    if _teacher(cfg) == distill_opening.KIND:
        return start, int(cfg.seeds.prior[1])
    if d.envs > cfg.seeds.prior[1] - start:
        raise PacplanError(f"distill.envs {d.envs} exceeds the {cfg.seeds.prior[1] - start} "
                           f"seeds of seeds.prior {list(cfg.seeds.prior)}")
    return start, start + d.envs


def _cfg(cfg: RunConfig) -> DistillConfig:
    if cfg.distill is None:
        raise PacplanError("this config has no distill section")
    return cfg.distill


def _teacher(cfg: RunConfig) -> str:
    """The teacher kind: distill.teacher among the world's, else the world's own (the world
    names its teachers, `pacplan.worlds.base.world_teacher`, never its name here)."""
    return world_teacher(cfg.world.name, _cfg(cfg).teacher)


def _look_ahead(cfg: RunConfig) -> bool:
    """Whether the teacher is the quadruped's look-ahead."""
    return _teacher(cfg) == "quadruped-look-ahead"


def check_request(cfg: RunConfig) -> None:
    """The one-line refusals, before any work (world, seed overlap, sizes)."""
    kind = _teacher(cfg)
    if kind == distill_opening.KIND:
        distill_opening.check_request(cfg)
        return
    if _cfg(cfg).opening is not None:
        raise PacplanError(f"distill.opening sets the {distill_opening.KIND} teacher; this "
                           f"distill section's teacher is {kind} (remove distill.opening)")
    if _look_ahead(cfg):
        from pacplan.pipeline.prior.distill_quadruped import check_request as check_quadruped

        check_quadruped(cfg, teacher_seeds(cfg))
        return
    distill_uav.check_request(cfg, teacher_seeds(cfg))


def distill(cfg: RunConfig, run_dir: str | Path | RunDir, log: Any = None) -> Path:
    """Run (or resume) the distillation stage; returns the distilled θ file (checked)."""
    check_request(cfg)
    d = _cfg(cfg)
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    out = rd.path / DIR
    final = out / THETA
    stamped = _inputs(cfg)
    _stamp(out, stamped, rd.option)
    files = Ledger(out, "file", lambda e: _FILES.fullmatch(e["file"]) is not None,
                   "distillation file")
    if files.read(THETA) is not None:
        return final
    say = log or (lambda _m: None)
    mend_log(out / LOG)
    t0 = time.perf_counter()
    lo, hi = teacher_seeds(cfg)
    seeds = np.arange(lo, hi, dtype=np.int64)
    if _teacher(cfg) == distill_opening.KIND:
        theta, records, chosen, base_rec = distill_opening.rounds(cfg, files, say)
        record: dict[str, Any] = {"teacher": distill_opening.TEACHER, "chosen_round": chosen,
                                  "base_eval": base_rec,
                                  "base_sha256": stamped["base_sha256"]}
    elif _look_ahead(cfg):
        from pacplan.pipeline.prior import distill_quadruped

        theta, records, chosen = distill_quadruped.rounds(cfg, seeds, _eval_seeds(cfg), files,
                                                          say)
        record = {"teacher": distill_quadruped.teacher_name(cfg.world.options),
                  "chosen_round": chosen}
    else:
        theta, records, t_lattice = distill_uav.rounds(cfg, seeds, _eval_seeds(cfg), files, say)
        record = {"teacher": "uav lattice dynamic program (pacplan.worlds.uav.teacher)"}
    record.update({"seeds": [lo, hi], "rounds": d.rounds, "config": _settings(cfg),
                   "seconds_this_call": round(time.perf_counter() - t0, 1)})
    if _teacher(cfg) == "uav-lattice":
        record["seconds_lattice_this_call"] = round(t_lattice, 1)
    record["rounds_log"] = records
    atomic_write_json(out / RECORD, record)
    files.write(THETA, safetensors_bytes({"theta": theta},
                                         {"distill": json.dumps(summary(record))}))
    return final


def _inputs(cfg: RunConfig) -> dict[str, Any]:
    """What the distilled θ depends on (the settings, the teacher's and held-out seeds, the
    UAV net's scale and policy family, or the quadruped's world), not where it runs (workers,
    threads). The paper's net adds no entry, so its stamps are those made before families."""
    settings = _settings(cfg)
    settings.pop("workers")
    if _teacher(cfg) == distill_opening.KIND:
        return {"distill": settings, "seeds": list(teacher_seeds(cfg)),
                "eval_seeds": list(cfg.seeds.prior_eval or ()),
                **distill_opening.inputs(cfg)}
    ev = _eval_seeds(cfg)
    inputs = {"distill": settings, "seeds": list(teacher_seeds(cfg)),
              "eval_seeds": None if ev is None else [int(ev[0]), int(ev[-1]) + 1],
              "net_scale": float(cfg.world.options.get("net_scale", 5.0))}
    if _look_ahead(cfg):  # its world options shape every label
        del inputs["net_scale"]
        inputs["world"] = {k: v for k, v in cfg.world.options.items() if k != "threads"}
    elif not distill_uav.policy_family_of(cfg).is_paper:
        inputs["policy"] = distill_uav.policy_family_of(cfg).options()
    return inputs


def _settings(cfg: RunConfig) -> dict[str, Any]:
    """The distill section as stamped and recorded: the teacher only when not the world's own
    and the opening only when set (so stamps made before they existed still match), the
    opening's base prior by content, not where it lives (`distill_opening.inputs`)."""
    settings = _cfg(cfg).model_dump(mode="json")
    if settings["teacher"] in (None, world_teacher(cfg.world.name)):
        del settings["teacher"]
    if settings["opening"] is None:
        del settings["opening"]
    if "opening" in settings:
        del settings["opening"]["base"]
        settings = distill_opening.stamp_settings(settings)
    return settings


def _stamp(out: Path, inputs: dict[str, Any], option: str) -> None:
    """Stamp `out` with `inputs`, or refuse a folder made from others: its checkpoints would
    give another prior (a chunk folder's stamp, `ChunkStore`, in the same format)."""
    path = out / STAMP
    if not path.is_file():
        atomic_write_json(path, {"identity": identity(inputs), "inputs": inputs})
        return
    old = ChunkStore.stamped_inputs(out)
    if old is None:
        raise PacplanError(f"{path}: damaged stamp, so the distillation beside it is unchecked; "
                           f"delete {out} to distil again")
    if identity(old) != identity(inputs):
        changed = sorted(f"distill.{k}" for k in inputs["distill"]
                         if identity(inputs["distill"][k]) != identity(
                             (old.get("distill") or {}).get(k)))
        changed += sorted(k for k in inputs if k != "distill"
                          and identity(inputs[k]) != identity(old.get(k)))
        raise PacplanError(f"{out} was distilled with other settings (changed: "
                           f"{', '.join(changed) or 'its stamp'}); use a new {option} directory, "
                           f"or delete {out} to distil again")


def summary(record: dict[str, Any]) -> dict[str, Any]:
    """What the prior's metadata states about its distillation (short): the result's round
    (the last, or the one chosen on held-out terrains, `chosen_round`)."""
    log = record["rounds_log"]
    used = log[record.get("chosen_round", len(log) - 1)] if log else {}
    out = {"teacher": record["teacher"], "seeds": record["seeds"], "rounds": record["rounds"],
           "states": used.get("states"), "eval_cost": used.get("eval_cost"),
           "eval_envs": used.get("eval_envs")}
    for key in ("chosen_round", "base_sha256"):  # where the stage chose, or refined a prior
        if key in record:
            out[key] = record[key]
    return out


def distilled_summary(path: str | Path) -> dict[str, Any]:
    """The summary a distilled θ file carries in its metadata (`summary`)."""
    meta = safetensors_metadata(Path(path).read_bytes())
    return json.loads(meta.get("distill", "{}"))


def _eval_seeds(cfg: RunConfig) -> np.ndarray | None:
    d = _cfg(cfg)
    if not d.eval_envs or cfg.seeds.prior_eval is None:
        return None
    start = int(cfg.seeds.prior_eval[0])
    n = min(d.eval_envs, int(cfg.seeds.prior_eval[1]) - start)
    return np.arange(start, start + n, dtype=np.int64)

