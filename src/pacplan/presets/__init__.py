"""The run configs and priors shipped inside the package, found by name.

`pacplan run uav-quick` reads `pacplan/presets/uav-quick.yaml` through `importlib.resources`, so
it works from any folder after a wheel install. The folder holds:

- `<name>.yaml`: the run presets (`pacplan presets` lists them with their first comment line);
- `priors/<prior>.safetensors`: the shipped priors, each made by `priors/<prior>-prior.yaml` (a
  config for `pacplan train-prior`, also found by name) with its training curve beside it
  (`<prior>-metrics.jsonl`, `<prior>-training.png`), and the weights files the presets use
  (`priors/quadruped-gait-init.safetensors`).

A preset's relative paths (`prior:`, `es.init_mean:`, `baselines[].weights:`) are read from the
preset's own folder, like any config's, so they point inside the installed package.

A file always wins: `pacplan run toy` runs `./toy` if such a file exists, the preset otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pacplan.errors import PacplanError
from pacplan.validation import did_you_mean

PRIORS = "priors"
"""The sub-folder with the shipped priors and the configs that trained them."""

_CONFIG_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class Preset:
    """A shipped config: its name (the file name without `.yaml`), file and one-line summary.

    `kind` is `run` for a run preset and `prior` for the config that trained a shipped prior.
    """

    name: str
    path: Path
    description: str
    kind: str


def presets_dir() -> Path:
    """The folder of the installed presets (inside the `pacplan` package)."""
    root = resources.files(__name__)
    path = Path(str(root))
    if not path.is_dir():  # e.g. a zip import: relative paths inside a preset could not resolve
        raise PacplanError(f"pacplan's presets are not a folder on disk ({root}); install "
                           "pacplan as a regular package (pip install pacplan)")
    return path


def description(path: Path) -> str:
    """A config's one-line summary: the text of its first comment line (empty if none)."""
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            stripped = line.strip()
            if not stripped:
                continue
            return stripped.lstrip("#").strip() if stripped.startswith("#") else ""
    return ""


def list_presets() -> list[Preset]:
    """Every shipped config: the run presets by name, then the prior-training configs."""
    root = presets_dir()
    found = [Preset(p.stem, p, description(p), "run") for p in sorted(root.glob("*.yaml"))]
    found += [Preset(p.stem, p, description(p), "prior")
              for p in sorted((root / PRIORS).glob("*.yaml"))]
    return found


def preset_names() -> list[str]:
    return [p.name for p in list_presets()]


def preset_path(name: str) -> Path:
    """The file of the preset `name`, or a `PacplanError` listing the presets."""
    for preset in list_presets():
        if preset.name == name:
            return preset.path
    hint = did_you_mean(name, preset_names()) or ";"
    raise PacplanError(f"unknown preset {name!r}{hint} presets: {', '.join(preset_names())} "
                       "(`pacplan presets` describes them)")


def seed_ranges(world: str) -> dict[str, tuple[int, int]]:
    """Every seed range of every shipped config of `world` (run presets and prior recipes whose
    names start with it), as "<preset> <role>" -> [start, stop): what a benchmark's held-out
    seeds must stay clear of."""
    import yaml

    out: dict[str, tuple[int, int]] = {}
    for preset in list_presets():
        if not preset.name.startswith(world):
            continue
        seeds = (yaml.safe_load(preset.path.read_text()) or {}).get("seeds") or {}
        for role, r in seeds.items():
            out[f"{preset.name} {role}"] = (int(r[0]), int(r[1]))
    return out


def shipped_priors() -> dict[str, Path]:
    """The shipped priors by name: `priors/<name>.safetensors` made by `<name>-prior.yaml`."""
    folder = presets_dir() / PRIORS
    return {p.stem: p for p in sorted(folder.glob("*.safetensors"), key=lambda p: p.stem)
            if (folder / f"{p.stem}-prior.yaml").is_file()}


# Names a release retired, with what replaced them: an old command gets the new name, not a
# bare "unknown" (0.2.0 made the taught UAV prior the shipped `uav`).
RENAMED_PRIORS = {"uav-taught": ("0.2.0", "uav (the taught prior; the ES-only one is now uav-es)")}
RENAMED_PRESETS = {"uav-taught": ("0.2.0", "uav-paper (it certifies the taught prior `uav` at the "
                                  "paper's sizes)"),
                   "uav-taught-prior": ("0.2.0", "uav-prior"),
                   "quadruped-taught-prior": ("0.3.0", "quadruped-prior (the recipe of the taught "
                                              "prior, now the shipped `quadruped`; the ES-only "
                                              "one's is quadruped-es-prior)")}
"""Retired name -> (the version that retired it, what replaced it)."""


def _renamed(kind: str, name: str, renamed: dict[str, tuple[str, str]]) -> None:
    if name in renamed:
        version, use = renamed[name]
        raise PacplanError(f"the {kind} {name!r} was renamed in pacplan {version}: use {use}")


def _is_bare_name(text: str) -> bool:
    """`uav-quick`, not `uav-quick.yaml`, `./uav-quick` or `configs/uav-quick`."""
    return bool(text) and "/" not in text and "\\" not in text and Path(text).name == text \
        and not text.endswith(_CONFIG_SUFFIXES)


def resolve_config(config: str | Path) -> Path:
    """A config file: `config` itself when that file exists, else the preset of that name.

    A bare name (no folder, no `.yaml`) that is neither a file nor a preset is an error listing
    the presets; a missing path is `config file not found`, with a hint when its name is a
    preset's (e.g. the `configs/uav-quick.yaml` of older checkouts).
    """
    path = Path(config)
    if path.is_file():
        return path
    text = str(config)
    if _is_bare_name(text):
        if text in preset_names():
            return preset_path(text)
        _renamed("preset", text, RENAMED_PRESETS)
        raise PacplanError(f"no config file or preset named {text!r}"
                           f"{did_you_mean(text, preset_names()) or ';'} presets: "
                           f"{', '.join(preset_names())} (`pacplan presets` describes them)")
    hint = ""
    if path.suffix in _CONFIG_SUFFIXES and path.stem in preset_names():
        hint = f"; the shipped preset of that name runs with `pacplan run {path.stem}`"
    raise PacplanError(f"config file not found: {path}{hint}")


def resolve_prior(prior: str | Path) -> Path:
    """A prior file: `prior` itself when that file exists, else the shipped prior of that name
    (`uav`, `quadruped`); anything else is a `PacplanError`, before any work is done."""
    path = Path(prior)
    if path.is_file():
        return path
    priors = shipped_priors()
    if _is_bare_name(str(prior)) and str(prior) in priors:
        return priors[str(prior)]
    if _is_bare_name(str(prior)):
        _renamed("shipped prior", str(prior), RENAMED_PRIORS)
    if _is_bare_name(str(prior)) and not path.suffix:
        raise PacplanError(f"no prior file or shipped prior named {str(prior)!r}"
                           f"{did_you_mean(prior, priors) or ';'} shipped priors: "
                           f"{', '.join(priors)}")
    raise PacplanError(f"prior file not found: {path}")
