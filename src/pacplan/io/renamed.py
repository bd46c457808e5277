"""Import paths recorded under a package's or module's old name, read as its new one: the one
map of what was renamed, for everything that reads an import path from a record (a world's
factory, a `gym` world's `policy: 'module:factory'`) or from a user's config.

Until 0.2 two packages shared a front-door function's name, which made `pacplan.run` and
`pacplan.certify_policy` packages doubling as functions; they were renamed (`pipeline`,
`policy_certification`) so the names are plain functions again, and the pipeline's modules
were grouped by job (`pipeline.execution`, `pipeline.prior`). A record written before, naming
"pacplan.run.…" or "pacplan.certify_policy.…", still resolves. The maps name parts of `pacplan`
(old -> new); add a line here when something a record may name is renamed again.
"""

from __future__ import annotations

RENAMED = {"run": "pipeline", "certify_policy": "policy_certification"}
"""Subpackages of `pacplan` renamed: old name -> new name."""

_EXECUTION = ("executors", "tasks", "parallel", "ray_executor", "ray_address", "chunks",
              "progress")
_PRIOR = ("training", "curve", "tensorboard", "distill", "distill_quadruped", "distill_store",
          "prior_world", "paper_priors")
MOVED = {f"pipeline.{m}": f"pipeline.execution.{m}" for m in _EXECUTION} | {
    f"pipeline.{m}": f"pipeline.prior.{m}" for m in _PRIOR}
"""Modules of `pacplan` moved into a subpackage: old dotted name -> new (after `RENAMED`)."""


def current_path(path: str) -> str:
    """`path` ("pacplan.package.module" or "pacplan.package.module:attribute") with a renamed
    package's or moved module's old name replaced by its new one; any other path unchanged."""
    module, sep, attr = path.partition(":")
    parts = module.split(".")
    if len(parts) < 2 or parts[0] != "pacplan":
        return path
    if parts[1] in RENAMED:
        parts[1] = RENAMED[parts[1]]
    if len(parts) >= 3 and f"{parts[1]}.{parts[2]}" in MOVED:
        parts[1:3] = MOVED[f"{parts[1]}.{parts[2]}"].split(".")
    return ".".join(parts) + sep + attr
