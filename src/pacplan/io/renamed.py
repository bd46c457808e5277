"""Import paths recorded under a package's old name, read as its new one: the one map of
renamed packages, for everything that reads an import path from a record (a world's factory,
a `gym` world's `policy: 'module:factory'`) or from a user's config.

Until 0.2 two packages shared a front-door function's name, which made `pacplan.run` and
`pacplan.certify_policy` packages doubling as functions; they were renamed so the names are
plain functions again. A record written before, naming "pacplan.run.…" or
"pacplan.certify_policy.…", still resolves. The map names subpackages of `pacplan` (old → new);
add a line here when a package that a record may name is renamed again.
"""

from __future__ import annotations

RENAMED = {"run": "pipeline", "certify_policy": "policy_certification"}
"""Subpackages of `pacplan` renamed: old name -> new name."""


def current_path(path: str) -> str:
    """`path` ("pacplan.package.module" or "pacplan.package.module:attribute") with a renamed
    package's old name replaced by its new one; any other path unchanged."""
    module, sep, attr = path.partition(":")
    parts = module.split(".")
    if len(parts) >= 2 and parts[0] == "pacplan" and parts[1] in RENAMED:
        parts[1] = RENAMED[parts[1]]
        return ".".join(parts) + sep + attr
    return path
