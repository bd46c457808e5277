"""The documentation site works offline: built strictly, it loads nothing from a network (no
CDN script, stylesheet, web font or image) and its code is coloured at build time by Pygments,
so a robot lab behind a firewall reads the same pages as everyone else."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[1]

pytest.importorskip("material", reason="the site's theme is mkdocs-material (the dev extra)")

# elements whose URL the browser fetches by itself when the page is shown (anchors are not)
LOADS = re.compile(r"<(?:script|link|img|iframe|source|video|audio|embed)\b[^>]*?"
                   r"\b(?:src|href|srcset)\s*=\s*[\"']?\s*(?:https?:)?//", re.I)
CSS_LOADS = re.compile(r"(?:@import\s+(?:url\()?|url\()\s*[\"']?\s*(?:https?:)?//", re.I)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or "mkdocs"
    proc = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(out)], cwd=REPO,
                          capture_output=True, text=True, timeout=600,
                          env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
def test_no_page_or_stylesheet_loads_anything_from_a_network(site: Path) -> None:
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 15
    for page in pages:
        html = page.read_text(encoding="utf-8")
        assert not LOADS.findall(html), (page, LOADS.findall(html)[:3])
        # Material's bundle fetches mermaid from a CDN only for a mermaid diagram
        assert 'class="mermaid"' not in html, page
    for css in site.rglob("*.css"):
        text = css.read_text(encoding="utf-8")
        assert not CSS_LOADS.findall(text), css
        assert "fonts.googleapis" not in text and "fonts.gstatic" not in text, css


@pytest.mark.slow
def test_code_is_coloured_at_build_time_and_tables_may_scroll(site: Path) -> None:
    deploy = (site / "deploy" / "index.html").read_text(encoding="utf-8")
    # Pygments' token classes in the HTML itself: `import` is a keyword (kn), numpy a name (nn)
    assert '<span class="kn">import</span>' in deploy
    assert '<span class="nn">numpy</span>' in deploy
    assert "highlight.js" not in deploy and "hljs" not in deploy
    assert 'href="../stylesheets/extra.css"' in deploy
    css = (site / "stylesheets" / "extra.css").read_text()
    assert re.search(r"\.md-typeset__table\s*\{[^}]*overflow-x:\s*auto", css)


@pytest.mark.slow
def test_formulas_are_mathml_that_the_browser_draws(site: Path) -> None:
    """$…$ in the Markdown became MathML at build time (scripts/mkdocs_math.py): no TeX left
    for a script to typeset, and no MathJax or KaTeX to fetch."""
    method = (site / "method" / "index.html").read_text(encoding="utf-8")
    assert method.count("<math") >= 10 and 'display="block"' in method
    assert "arithmatex" not in method and "\\frac" not in method
    assert "mathjax" not in method.lower() and "katex" not in method.lower()
