"""The wheel as a user installs it: built from the source distribution, installed into a fresh
venv, it runs a shipped preset from an empty folder and verifies the certificate.

Offline and quick: the wheel is built without build isolation (the setuptools of this venv) and
installed with `--no-deps`; the fresh venv gets the dependencies through a `.pth` line naming
this venv's site-packages. A plain path line in a `.pth` file does not run the `.pth` files of
that folder, so this checkout's editable install (`__editable__.pacplan-*.pth` → `src/`) stays
invisible: the test asserts that `pacplan` is imported from the fresh venv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[1]
PRESETS = REPO / "src" / "pacplan" / "presets"

pytest.importorskip("build", reason="building the wheel needs `build` (the dev extra)")


def _sh(args: list[str | Path], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 300) -> str:
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """(sdist, wheel, build log): the sdist built from a copy of the project's packaging files,
    then the wheel built from the sdist, as pip builds one from an sdist."""
    tmp = tmp_path_factory.mktemp("dist")
    project = tmp / "project"
    shutil.copytree(REPO / "src", project / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", "CITATION.cff",
                 "MANIFEST.in"):
        shutil.copy2(REPO / name, project / name)
    log = _sh([sys.executable, "-m", "build", "--no-isolation", "--outdir", tmp / "dist",
               project], cwd=tmp)
    (sdist,) = (tmp / "dist").glob("pacplan-*.tar.gz")
    (built,) = (tmp / "dist").glob("pacplan-*.whl")
    # pacplan depends on pacplan_runtime (runtime/, not on an index): a wheel user installs both
    shutil.copytree(REPO / "runtime", tmp / "runtime",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    _sh([sys.executable, "-m", "build", "--no-isolation", "--wheel", "--outdir",
         tmp / "runtime-dist", tmp / "runtime"], cwd=tmp)
    return sdist, built, log


@pytest.fixture(scope="module")
def runtime_wheel(dists: tuple[Path, Path, str]) -> Path:
    (built,) = (dists[1].parent.parent / "runtime-dist").glob("pacplan_runtime-*.whl")
    return built


@pytest.fixture(scope="module")
def wheel(dists: tuple[Path, Path, str]) -> tuple[Path, str]:
    return dists[1], dists[2]


@pytest.fixture(scope="module")
def fresh_venv(wheel: tuple[Path, str], runtime_wheel: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv with only the two wheels installed in it; the other dependencies come from
    this venv."""
    root = tmp_path_factory.mktemp("venv") / "fresh"
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    site = Path(_sh([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                    cwd=root).strip())
    (site / "pacplan-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _sh([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index",
         "--disable-pip-version-check", "--quiet", runtime_wheel, wheel[0]], cwd=root)
    return root


def _user_env() -> dict[str, str]:
    """The environment of a user's shell: nothing pointing at this checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PACPLAN_PAPER_DATA"}}
    env.setdefault("MPLBACKEND", "Agg")
    return env


def test_wheel_holds_the_presets_priors_and_license(wheel: tuple[Path, str]) -> None:
    built, log = wheel
    names = set(zipfile.ZipFile(built).namelist())
    shipped = {f"pacplan/presets/{p.relative_to(PRESETS).as_posix()}"
               for p in PRESETS.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert shipped - names == set(), "files of src/pacplan/presets missing from the wheel"
    assert {"pacplan/presets/toy.yaml", "pacplan/presets/uav-quick.yaml",
            "pacplan/presets/priors/uav.safetensors",
            "pacplan/presets/priors/quadruped.safetensors"} <= names
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    assert f"{dist_info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(built).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert "Requires-Dist: setuptools" not in metadata  # no runtime pin of the user's setuptools
    from pacplan_runtime import __version__ as runtime_version

    assert f"Requires-Dist: pacplan_runtime=={runtime_version}" in metadata
    assert "pacplan_runtime/" not in " ".join(names)  # one owner per file: the runtime's wheel
    assert "Project-URL: Repository" in metadata and "Classifier: " in metadata
    # the deprecated license table printed a ~40-line warning box on every build
    assert "deprecat" not in log.lower() and "project.license" not in log, log


def test_sdist_holds_the_changelog_citation_license_and_presets(
        dists: tuple[Path, Path, str]) -> None:
    with tarfile.open(dists[0]) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert {"CHANGELOG.md", "CITATION.cff", "LICENSE", "README.md", "pyproject.toml",
            "src/pacplan/presets/uav-quick.yaml",
            "src/pacplan/presets/priors/uav.safetensors"} <= names


def test_fresh_venv_runs_a_preset_from_an_empty_folder(fresh_venv: Path, tmp_path: Path) -> None:
    from pacplan import __version__

    bin_dir = fresh_venv / "bin"
    empty = tmp_path / "empty"
    empty.mkdir()
    env = _user_env()
    where = _sh([bin_dir / "python", "-c", "import pacplan, pacplan.presets as p; "
                 "print(pacplan.__file__); print(p.presets_dir()); "
                 "import pacplan.runtime as r; print(r.bundle.__file__)"],
                cwd=empty, env=env)
    for line in where.split():
        assert Path(line).resolve().is_relative_to(fresh_venv.resolve()), where
        assert not Path(line).resolve().is_relative_to(REPO), where

    assert _sh([bin_dir / "pacplan", "--version"], cwd=empty, env=env).strip() == \
        f"pacplan {__version__}"
    listing = _sh([bin_dir / "pacplan", "presets"], cwd=empty, env=env)
    assert "toy" in listing and "uav-quick" in listing and "Synthetic toy world" in listing

    out = _sh([bin_dir / "pacplan", "run", "toy", "--out", "X", "--quiet"], cwd=empty, env=env)
    assert "certified cost" in out
    checked = _sh([bin_dir / "pacplan", "verify", "X/certificate.json"], cwd=empty, env=env)
    assert checked.startswith("OK"), checked
    assert sorted(p.name for p in empty.iterdir()) == ["X"]  # nothing written beside the run


@pytest.mark.slow
def test_fresh_venv_runs_uav_quick_from_an_empty_folder(fresh_venv: Path, tmp_path: Path) -> None:
    """The README's main job after a wheel install: the shipped prior is found in the package,
    the certificate verifies, and every artifact is the pinned one (tests/pins.py)."""
    from pins import PINNED, UAV_QUICK, check_pinned

    bin_dir = fresh_venv / "bin"
    env = _user_env()
    out = _sh([bin_dir / "pacplan", "run", "uav-quick", "--quiet"], cwd=tmp_path, env=env,
              timeout=1800)
    assert "certified cost" in out
    assert (tmp_path / "runs" / "uav-quick" / "report.md").is_file()
    checked = _sh([bin_dir / "pacplan", "verify", "runs/uav-quick/certificate.json"],
                  cwd=tmp_path, env=env)
    assert checked.startswith("OK"), checked
    check_pinned(tmp_path / "runs" / "uav-quick", UAV_QUICK, PINNED / "uav-quick")
