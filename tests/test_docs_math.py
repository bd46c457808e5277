"""The docs' formulas are LaTeX turned into MathML at build time (scripts/mkdocs_math.py), so
the site draws them with no script or font from a network: every formula on every page
converts, none is left as raw TeX, and a formula that cannot be drawn is refused by name."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"

pytest.importorskip("latex2mathml", reason="formulas are drawn by latex2mathml (the docs extra)")
markdown = pytest.importorskip("markdown")
pytest.importorskip("pymdownx")


def _hook():
    spec = importlib.util.spec_from_file_location("mkdocs_math", REPO / "scripts" /
                                                  "mkdocs_math.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _html(text: str) -> str:
    """A page's HTML as the site's Markdown extensions make it (mkdocs.yml)."""
    return markdown.markdown(text, extensions=["tables", "attr_list", "pymdownx.superfences",
                                               "pymdownx.arithmatex"],
                             extension_configs={"pymdownx.arithmatex": {"generic": True}})


def _outside_code(html: str) -> str:
    return re.sub(r"<(pre|code)\b.*?</\1>", "", html, flags=re.S)


def test_inline_and_displayed_formulas_become_mathml() -> None:
    hook = _hook()
    html = _html("Cost $\\hat C \\le 1$ and $a < b$ here, and `$not math$` in code.\n\n"
                 "$$\nR = \\frac{\\ln(2\\sqrt{N}/\\delta)}{2N}\n$$\n")
    out = hook.to_mathml(html, "page.md")
    assert out.count("<math") == 3 and "arithmatex" not in out
    assert out.count('display="inline"') == 2 and out.count('display="block"') == 1
    assert "<mfrac>" in out and "<msqrt>" in out and "&#x02264;" in out  # ≤
    assert "&#x0003C;" in out  # the escaped < of `a < b` reached the converter as <
    assert "<code>$not math$</code>" in out


@pytest.mark.parametrize("tex, problem", [("\\frac{a}{", "cannot render"),
                                          ("\\hatt C", "uses \\hatt")])
def test_a_formula_that_cannot_be_drawn_fails_naming_it(tex: str, problem: str) -> None:
    html = _html(f"text ${tex}$ text")
    with pytest.raises(ValueError, match=re.escape(problem)) as info:
        _hook().to_mathml(html, "docs/x.md")
    assert str(info.value).startswith("docs/x.md:")


def test_every_formula_in_the_docs_is_drawn() -> None:
    hook = _hook()
    pages_with_math = set()
    for page in sorted(DOCS.rglob("*.md")):
        html = _html(page.read_text(encoding="utf-8"))
        out = hook.to_mathml(html, page.relative_to(DOCS).as_posix())
        if "<math" in out:
            pages_with_math.add(page.relative_to(DOCS).as_posix())
        text = _outside_code(out)
        assert "arithmatex" not in text, page
        assert not re.search(r"\\(?:frac|sqrt|hat|ln|le|delta)\b", text), (
            f"{page}: raw TeX left outside a formula")
    assert {"method.md", "design.md"} <= pages_with_math
