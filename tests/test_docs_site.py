"""The documentation site: it builds in strict mode, and the code it shows runs as written."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(encoding="utf-8"),
                      flags=re.S | re.M)


def _run_blocks(blocks: list[str], where: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each block in a fresh namespace, in an empty folder, as a reader would paste it."""
    monkeypatch.chdir(where)
    for i, code in enumerate(blocks):
        exec(compile(code, f"<docs block {i}>", "exec"), {"__name__": "__docs__"})


def test_site_builds_strict_without_warnings(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log
    assert "WARNING" not in log, log
    # the API reference was generated from the docstrings, not left as `:::` lines
    api = (site / "api" / "pacbayes" / "index.html").read_text(encoding="utf-8")
    assert 'id="pacplan.pacbayes.certificate.build_certificate"' in api
    assert ":::" not in api
    for page in ("", "method", "tutorial", "certify-matrix", "verify", "worlds", "ray", "design",
                 "api", "changelog"):
        assert (site / page / "index.html").is_file(), page


def test_every_docs_page_is_in_the_nav() -> None:
    nav = (REPO / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert {p for p in pages if p not in nav} == set()


def test_api_page_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = _python_blocks(DOCS / "api" / "index.md")
    assert len(blocks) == 2, "the API page shows two examples: a run, and a matrix in memory"
    _run_blocks(blocks, tmp_path, monkeypatch)
    assert (tmp_path / "runs" / "toy-small" / "certificate.json").is_file()
    assert (tmp_path / "certificate.json").is_file()


def test_worlds_page_gymnasium_example_runs(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gymnasium")
    pytest.importorskip("torch")
    blocks = [b for b in _python_blocks(DOCS / "worlds.md") if "gym.make" in b]
    assert len(blocks) == 1
    _run_blocks(blocks, tmp_path, monkeypatch)



def test_tutorial_page_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tutorial's blocks in order; a block whose first line is `# NAME.py` is the module the
    reader saves (written to the folder, which is on sys.path as it is for `python` run there)."""
    from pacplan.worlds import base

    blocks = _python_blocks(DOCS / "tutorial.md")
    modules = {m.group(1): b for b in blocks if (m := re.match(r"# (\w+\.py)\n", b))}
    assert len(blocks) == 5 and list(modules) == ["reach_world.py"]
    for name, code in modules.items():
        (tmp_path / name).write_text(code, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # `reach` stays in this test
    monkeypatch.delitem(sys.modules, "reach_world", raising=False)
    try:
        _run_blocks([b for b in blocks if b not in modules.values()], tmp_path, monkeypatch)
    finally:
        sys.modules.pop("reach_world", None)
    for run_name in ("reach", "cartpole-tiny"):
        assert (tmp_path / "runs" / run_name / "certificate.json").is_file(), run_name


def _ray_flags(ray: str, *command: str) -> set[str]:
    proc = subprocess.run([ray, *command, "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(re.findall(r"(--[a-z][a-z-]+)", proc.stdout))


def test_ray_flags_named_in_the_docs_exist() -> None:
    """Every Ray flag the Ray page names is one the installed Ray accepts."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray is None:
        pytest.skip("Ray is not installed")
    text = (DOCS / "ray.md").read_text(encoding="utf-8")
    exposure = text[text.index("## Network exposure"):]
    named = set(re.findall(r"(--[a-z][a-z-]+)", exposure))
    for line in text.splitlines():
        if "ray start" in line:
            named |= set(re.findall(r"(--[a-z][a-z-]+)", line))
    named -= {"--executor", "--workers", "--out"}  # pacplan's own options
    assert "--generate" in named  # `ray get-auth-token --generate`
    assert "--generate" in _ray_flags(ray, "get-auth-token")
    assert named - {"--generate"} - _ray_flags(ray, "start") == set()
    assert {"--node-ip-address", "--dashboard-host", "--port"} <= named
