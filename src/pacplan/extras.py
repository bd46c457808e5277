"""Optional dependencies: which `pacplan[...]` extra installs a module, and the one-line error
that says so when a feature needs a module that is not installed.

The core install (`pip install ./runtime .`) runs the toy, UAV and Gymnasium worlds,
certification, verification and reports; heavy engines are extras, so a module of a feature
that needs one imports it through `require` (at import time of that module, which only that
feature imports) instead of failing with a bare `No module named ...`.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from pacplan.errors import PacplanError

EXTRAS: dict[str, str] = {
    "pybullet": "bullet",
    "pybullet_data": "bullet",
    "mujoco": "mujoco",
    "ray": "ray",
    "onnx": "export",
    "stable_baselines3": "rl",
    "Box2D": "rl",
    "pygame": "rl",
    "tensorboard": "tensorboard",
    "moviepy": "video",
}
"""Top-level module → the extra of pyproject.toml that installs it."""


class MissingExtraError(PacplanError, ImportError):
    """A feature's optional dependency is not installed. An `ImportError` too, so code that
    falls back when an import fails still does; the CLI prints it as one line (exit 2)."""


def install_hint(module: str) -> str:
    """The pip command that installs `module` (its extra where pacplan has one)."""
    top = module.split(".")[0]
    extra = EXTRAS.get(top)
    return f'pip install "pacplan[{extra}]"' if extra else f"pip install {top}"


def require(module: str, purpose: str) -> ModuleType:
    """Import `module` for `purpose` (e.g. "the quadruped world"), or raise a
    `MissingExtraError` naming the extra that installs it. An import error from inside an
    installed module (a broken install, a missing dependency of its own) is not hidden."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.split(".")[0]
        if exc.name is None or exc.name.split(".")[0] != top:
            raise
        raise MissingExtraError(
            f"{purpose} needs {top}, which is not installed: {install_hint(top)}"
        ) from None
