"""The shipped presets and priors: found by name inside the package, a file always wins, every
file they name is shipped with them, and every file among them goes into the wheel."""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest

import pacplan
from pacplan.config import load_config
from pacplan.errors import PacplanError
from pacplan.es.checkpoint import load_prior, read_prior_file
from pacplan.io.files import safetensors_metadata
from pacplan.presets import (
    PRIORS,
    description,
    list_presets,
    preset_names,
    preset_path,
    presets_dir,
    resolve_config,
    resolve_prior,
    shipped_priors,
)

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[2]

RUN_PRESETS = {"toy", "gym-cartpole", "gym-inverted-pendulum", "uav-quick", "uav-paper",
               "uav-tight",
               "quadruped-quick", "quadruped-hard", "quadruped-hour", "quadruped-paper",
               "quadruped-paper-n1000", "quadruped-paper-n2000",
               "quadruped-paper-bullet", "quadruped-paper-code", "quadruped-paper-code-n1000",
               "quadruped-mujoco-quick"}


def test_presets_live_inside_the_package() -> None:
    assert presets_dir() == Path(pacplan.__file__).parent / "presets"
    assert not (REPO / "configs").exists() and not (REPO / "priors").exists()  # one home
    assert {p.name for p in list_presets() if p.kind == "run"} == RUN_PRESETS
    assert {p.name for p in list_presets() if p.kind == "prior"} == {
        "uav-prior", "uav-es-prior", "uav-paper-prior", "uav-paper-net-prior", "quadruped-prior",
        "quadruped-es-prior", "quadruped-paper-code-prior", "quadruped-paper-code-bullet-prior",
        "quadruped-paper-code-twin-prior"}
    assert len(set(preset_names())) == len(preset_names())  # a name means one file


def test_every_preset_has_a_one_line_description() -> None:
    for p in list_presets():
        first = p.path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# ") and p.description == first[2:].strip(), p.name
        assert 20 <= len(p.description) <= 100 and p.description[-1] in ".)", p.description


def test_description_is_the_first_comment_line(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("\n#  Hello there.\n# more\nname: a\n")
    (tmp_path / "b.yaml").write_text("name: b  # not a description\n")
    assert description(tmp_path / "a.yaml") == "Hello there."
    assert description(tmp_path / "b.yaml") == ""


def test_relative_paths_of_a_preset_resolve_inside_the_package() -> None:
    root = presets_dir().resolve()
    for p in list_presets():
        cfg = load_config(p.path)
        files = [cfg.prior, *(b.weights for b in cfg.baselines)]
        if isinstance(cfg.es.init_mean, str):
            files.append(cfg.es.init_mean)
        if isinstance(cfg.es.init_var, str):
            files.append(cfg.es.init_var)
        for f in (f for f in files if f is not None):
            assert Path(f).is_file() and Path(f).resolve().is_relative_to(root), (p.name, f)


def test_shipped_priors_and_how_they_were_made() -> None:
    priors = shipped_priors()
    assert set(priors) == {"uav", "uav-es", "uav-paper-net", "quadruped", "quadruped-es",
                           "quadruped-paper-code", "quadruped-paper-code-twin"}
    scales: dict[str, float] = {}
    for name, path in priors.items():
        mu, logvar = load_prior(path)
        assert mu.shape == logvar.shape and mu.size > 0
        folder = path.parent
        for made_by in (f"{name}-prior.yaml", f"{name}-metrics.jsonl", f"{name}-training.png"):
            assert (folder / made_by).is_file(), made_by
        recipe = load_config(folder / f"{name}-prior.yaml")
        assert recipe.name == f"{name}-prior"
        # the file states the σ scale its recipe writes (the taught quadruped prior's: 0.5)
        recorded = safetensors_metadata(path.read_bytes()).get("sigma_scale")
        scales[name] = recipe.es.prior_sigma_scale
        assert recorded == (None if scales[name] == 1.0 else repr(scales[name])), name
    assert scales["quadruped"] == 0.5 and scales["quadruped-es"] == 1.0
    # a prior trained by train-prior says where: the paper-code one was taught in PyBullet
    # from the one trained on the MuJoCo twin, which its recipe names as its base
    assert read_prior_file(priors["quadruped-paper-code"]).world == {
        "name": "quadruped", "options": {"variant": "paper-code", "physics": "bullet"}}
    assert read_prior_file(priors["quadruped-paper-code-twin"]).world == {
        "name": "quadruped", "options": {"variant": "paper-code", "physics": "mujoco",
                                         "robot": "derpy"}}
    taught = load_config(priors["quadruped-paper-code"].parent / "quadruped-paper-code-prior.yaml")
    assert taught.distill is not None and taught.distill.opening is not None
    assert Path(taught.distill.opening.base) == priors["quadruped-paper-code-twin"]
    # the shipped UAV prior, a convnet, names its policy family, which a run adopts (issue 52)
    conv = read_prior_file(priors["uav"])
    assert conv.world["options"]["policy"] == "conv" and conv.mu.size == 127_845


def test_package_data_globs_ship_every_preset_file() -> None:
    """A new kind of file among the presets must be added to pyproject's package-data."""
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = data["tool"]["setuptools"]["package-data"]["pacplan"]
    package = presets_dir().parent
    files = [p.relative_to(package).as_posix() for p in presets_dir().rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".py"]
    assert files
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert unshipped == []
    total = sum((package / f).stat().st_size for f in files)
    # ≈ 4.6 MB today: 2.05 MB the conv UAV prior (127,845 float64 means and log-variances,
    # issue 52), 1.15 MB the ES-only UAV prior's 2,400-iteration training record, the rest the
    # other priors, figures and records: a budget against a stray large file, not a promise
    assert total < 5_500_000, f"the presets add {total} bytes to the wheel"


# -- a file wins, then a preset by name ---------------------------------------------------------
def test_a_bare_name_is_a_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_config("uav-quick") == preset_path("uav-quick")
    assert resolve_config("uav-prior") == presets_dir() / PRIORS / "uav-prior.yaml"


def test_an_existing_file_wins_over_a_preset(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("toy").write_text("name: mine\nworld: {name: toy}\n")
    assert resolve_config("toy") == Path("toy")
    assert load_config(resolve_config("toy")).name == "mine"
    Path("toy").unlink()
    Path("toy").mkdir()  # a folder is not a config: the preset still answers
    assert resolve_config("toy") == preset_path("toy")
    mine = tmp_path / "my.yaml"
    mine.write_text("name: mine\nworld: {name: toy}\n")
    assert resolve_config(mine) == mine and resolve_config(str(mine)) == mine


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("nosuch", r"no config file or preset named 'nosuch'; presets: .*toy.*uav-quick"),
        ("toy.yaml", r"config file not found: toy\.yaml; the shipped preset of that name runs "
                     r"with `pacplan run toy`"),
        ("configs/uav-quick.yaml", r"config file not found: configs/uav-quick\.yaml; the shipped "
                                   r"preset"),
        ("somewhere/else.yaml", r"^config file not found: somewhere/else\.yaml$"),
    ],
)
def test_unknown_configs_are_one_line_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             given: str, message: str) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PacplanError, match=message):
        resolve_config(given)


def test_unknown_preset_name_lists_the_presets() -> None:
    with pytest.raises(PacplanError, match=r"unknown preset 'nosuch'; presets: .*toy"):
        preset_path("nosuch")


def test_priors_by_file_or_shipped_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_prior("uav") == shipped_priors()["uav"]
    Path("uav").write_bytes(b"mine")
    assert resolve_prior("uav") == Path("uav")  # a file wins
    with pytest.raises(PacplanError, match=r"no prior file or shipped prior named 'nope'; "
                                           r"shipped priors: quadruped, quadruped-es, "
                                           r"quadruped-paper-code, quadruped-paper-code-twin, uav, "
                                           r"uav-es, uav-paper-net"):
        resolve_prior("nope")
    with pytest.raises(PacplanError, match=r"prior file not found: nope\.safetensors"):
        resolve_prior("nope.safetensors")


def test_retired_names_say_what_replaced_them() -> None:
    """0.2.0 made the taught UAV prior the shipped `uav`, 0.3.0 the taught quadruped prior the
    shipped `quadruped`: the old names get the new ones."""
    with pytest.raises(PacplanError, match=r"shipped prior 'uav-taught' was renamed .* use uav "):
        resolve_prior("uav-taught")
    with pytest.raises(PacplanError, match=r"preset 'uav-taught' was renamed .* use uav-paper "):
        resolve_config("uav-taught")
    with pytest.raises(PacplanError, match=r"preset 'uav-taught-prior' .* use uav-prior$"):
        resolve_config("uav-taught-prior")
    with pytest.raises(PacplanError, match=r"preset 'quadruped-taught-prior' was renamed in "
                                           r"pacplan 0\.3\.0: use quadruped-prior "):
        resolve_config("quadruped-taught-prior")
