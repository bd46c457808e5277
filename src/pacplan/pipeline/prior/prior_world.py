"""Where a prior was trained against where it is certified: a transfer says so.

A PAC-Bayes prior may come from anywhere that saw none of the certification data, so a prior
trained in one world (the quadruped's MuJoCo twin, or the text variant) may be certified in
another (PyBullet, the paper-code variant). The certificate then holds for the world it was
computed in; the run's log, its report and the certificate's `provenance.prior_world` say where
the prior came from, so nobody reads the figure as one of a prior trained there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pacplan.errors import PacplanError
from pacplan.es.checkpoint import read_prior
from pacplan.io.files import sha256_bytes
from pacplan.pipeline.rundir import RunDir


def recorded_prior_world(path: Path, sha256: str | None,
                         option: str = "--out") -> dict[str, Any] | None:
    """The world a run's prior file says it was trained in, read once and only if the bytes
    still have the hash the run recorded (what is stated is what was checked); a refusal
    names the run directory by `option`, as the caller spells it."""
    data = path.read_bytes()
    if sha256 is None or sha256_bytes(data) != sha256:
        raise PacplanError(f"{path} is not the prior the run recorded (sha256 "
                           f"{sha256_bytes(data)[:12]}…); restore it or use a new {option}")
    return read_prior(data, str(path)).world


def transfer_note(trained_in: dict[str, Any] | None, world: dict[str, Any]) -> str | None:
    """One sentence when the prior file says it was trained in another world than the one it
    is certified in (another variant or engine: a transfer experiment), else None.

    Compared: the world's name and each option both name with different values. Options set
    on one side only are not (a default on one side is not known here, and the quadruped's
    depends on its variant); options that only change how fast rollouts run (threads, the
    UAV's device) do not count. `provenance.prior_world` keeps the whole record either way."""
    if trained_in is None:
        return None
    fast = {"threads", "device", "compile", "chunk"}
    a, b = trained_in["options"], world["options"]
    diff = sorted(k for k in set(a) & set(b) - fast if a[k] != b[k])
    if trained_in["name"] == world["name"] and not diff:
        return None
    said = ", ".join(f"{k}: {a.get(k)!r} there, {b.get(k)!r} here" for k in diff)
    if trained_in["name"] != world["name"]:
        said = f"world {trained_in['name']!r} there, {world['name']!r} here"
    return (f"transfer: the prior was trained in another world than the one certified ({said}); "
            "the certificate still holds for this world, and its provenance.prior_world says "
            "where the prior came from")


def adopt_prior_options(cfg: Any, source: str | Path | None) -> str | None:
    """A prior names what its weights are: the world options its file records that choose the
    policy family (the world factory's `PRIOR_OPTIONS`, the UAV's `policy` and `policy_width`)
    are set on `cfg.world.options` when the config sets none of them, so `pacplan run
    uav-paper --prior uav-es` flies the paper's net and the shipped `uav` prior its conv net.

    A config that sets any of them keeps its own (a mismatch is then refused, naming both sizes,
    when the prior is copied). A prior that records no world, or another world, sets nothing.
    Returns the sentence a run's log says, or None when nothing was set."""
    from pacplan.worlds.base import prior_options

    keys = prior_options(cfg.world.name)
    if not keys or any(k in cfg.world.options for k in keys):
        return None
    if source is None or not Path(source).is_file():
        return None
    trained_in = read_prior(Path(source).read_bytes(), str(source)).world
    if not trained_in or trained_in["name"] != cfg.world.name:
        return None
    recorded = trained_in["options"]
    adopted = {k: recorded[k] for k in keys if k in recorded}
    if not adopted:
        return None
    cfg.world.options.update(adopted)
    said = ", ".join(f"{k}: {v}" for k, v in adopted.items())
    return f"world options from the prior's file ({said}): the policy family it was trained as"


def prior_source(cfg: Any, prior_file: str | Path | None, run_dir: str | Path) -> Path | None:
    """The prior file a run will certify, as far as it is known before the run: the given one,
    the config's, or the one a resumed run directory already holds (its hash is checked when
    the run starts)."""
    if prior_file is not None or cfg.prior is not None:
        return Path(prior_file if prior_file is not None else cfg.prior)
    held = Path(run_dir) / RunDir.PRIOR
    return held if held.is_file() else None
