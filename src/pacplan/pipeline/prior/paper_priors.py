"""The paper's published Minitaur prior as a pacplan prior file, written again byte for byte.

pacplan fetches the paper's files (`pacplan data paper`, pinned by sha256), so a run of the
paper's prior committed mid-way (`stages/`) is kept without its `prior.safetensors`;
`pacplan data minitaur-prior` writes the same bytes again, and every command that finds it
missing names that command (`pacplan.io.paperdata.missing_minitaur_prior`).
"""

from __future__ import annotations

import os
from pathlib import Path

from pacplan.errors import PacplanError
from pacplan.es.checkpoint import save_prior
from pacplan.io import paperdata
from pacplan.io.files import sha256_file
from pacplan.io.outputs import protecting_folder, refuse_overwriting
from pacplan.pipeline.rundir import Manifest, RunDir

MINITAUR_PRIOR_WORLD = {"name": "quadruped", "options": {"variant": "paper-code",
                                                         "physics": "bullet"}}
"""Where the paper's Minitaur prior was trained: its code's experiment, which pacplan rebuilds as
`variant: paper-code`, in PyBullet (a certificate anywhere else says "transfer")."""


def write_minitaur_prior(out: Path, folder: Path | None = None) -> str:
    """Write the paper's Minitaur prior (μ and log σ² in pacplan's layout, an exact relabelling
    of the last layer's outputs) to `out` as `save_prior` writes a trained one; its sha256.

    A run draws its m policies from it as it draws any prior's (seed `policies.seed`), not as
    the paper's code drew its own."""
    from pacplan.worlds.quadruped.paper_prior import load_paper_prior

    folder = folder if folder is not None else paperdata.paper_data_dir()
    if folder is None:
        raise PacplanError("the paper's Minitaur prior is not here: run `pacplan data paper` "
                           "first (it fetches the paper's files, pinned by sha256)")
    mu, logvar = load_paper_prior(folder)
    save_prior(out, mu, logvar, iteration=0, world=MINITAUR_PRIOR_WORLD)
    return sha256_file(out)


def write_minitaur_prior_file(out: Path, folder: Path | None = None) -> tuple[str, bool]:
    """`pacplan data minitaur-prior OUT`: (sha256, restored). A new file anywhere a command may
    write (`refuse_overwriting`); or, inside a run directory, only the run's own missing
    `prior.safetensors` when its manifest records this file's sha256: written beside, checked,
    then renamed in, so a run folder never holds other bytes under that name."""
    run = _run_missing_the_paper_prior(out)
    if run is None:
        refuse_overwriting(out, "OUT", file=True)
        if out.exists():
            raise PacplanError(f"OUT {out} already exists: remove it or choose another path")
        return write_minitaur_prior(out, folder), False
    partial = run / f".{RunDir.PRIOR}.partial"
    with RunDir(run).locked():
        return _restore(partial, out, folder, run), True


def _restore(partial: Path, out: Path, folder: Path | None, run: Path) -> str:
    """Write the prior at `partial`, and rename it to `out` only if its sha256 is the one
    recorded; the partial file never stays."""
    try:
        digest = write_minitaur_prior(partial, folder)
        recorded = paperdata.MINITAUR_PRIOR_SHA256
        if digest != recorded:
            raise PacplanError(f"the prior written has sha256 {digest[:12]}…, not the "
                               f"{recorded[:12]}… {run / RunDir.MANIFEST} records; "
                               "nothing was put in the run directory")
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return digest


def _run_missing_the_paper_prior(out: Path) -> Path | None:
    """The run directory whose missing prior.safetensors `out` is, when its manifest records the
    paper's Minitaur prior there; None otherwise."""
    found = protecting_folder(out)
    if found is None or found[0] != "run directory":
        return None
    run = found[1]
    if out.name != RunDir.PRIOR or out.exists() or os.path.abspath(out.parent) != \
            os.path.abspath(run):
        return None
    return run if Manifest(run).sha(RunDir.PRIOR) == paperdata.MINITAUR_PRIOR_SHA256 else None
