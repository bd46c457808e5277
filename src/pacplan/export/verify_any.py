"""What `pacplan verify PATH` and `pacplan.verify(path)` check, decided in one place: a planner
directory (`pacplan.export.check`), a certificate in a certify-policy folder or in a run
directory (each folder's own checks: `pacplan.policy_certification.provenance`,
`pacplan.pipeline.provenance`), or a certificate file alone."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pacplan.export.check import is_planner_dir, verify_planner
from pacplan.pacbayes.record import Certificate
from pacplan.policy_certification.provenance import policy_dir_of, verify_saved_in_full

PLANNER = "planner"
POLICY_FOLDER = "certify-policy folder"
CERTIFICATE = "certificate"


@dataclass(frozen=True)
class Checked:
    """A path that verified: its certificate, what it was, and what it rests on that could
    not be checked (a recorded file not found, a Python object no file holds)."""

    certificate: Certificate
    kind: str
    """`PLANNER`, `POLICY_FOLDER` (a certificate in one) or `CERTIFICATE` (in a run
    directory, or alone)."""
    unchecked: tuple[str, ...] = ()


def verify_any(path: Path) -> Checked:
    """Verify whatever `path` is, with the checks of where it lies; the first thing that does
    not check is a one-line `PacplanError`."""
    if is_planner_dir(path):
        return Checked(verify_planner(path), PLANNER)
    verified = verify_saved_in_full(path)
    kind = POLICY_FOLDER if policy_dir_of(path) is not None else CERTIFICATE
    return Checked(verified.certificate, kind, verified.unchecked)
