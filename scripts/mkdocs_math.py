"""MkDocs hook: the docs' LaTeX formulas become MathML when the site is built.

`pymdownx.arithmatex` (generic mode) finds `$…$` and `$$…$$` outside code and leaves each as
`<span class="arithmatex">\\(…\\)</span>` or `<div class="arithmatex">\\[…\\]</div>`; this
hook converts them with latex2mathml (pure Python). Browsers draw MathML themselves, so a page
needs no MathJax or KaTeX script, font or CDN: the site reads the same behind a lab's firewall.
A formula latex2mathml cannot read, or with a command it does not know, fails the build,
naming the page and the formula.
"""

from __future__ import annotations

import html
import re
from typing import Any

_UNKNOWN = re.compile(r">(\\[A-Za-z]+)<")  # latex2mathml shows an unknown command as text
_MATH = re.compile(r'<(?P<tag>span|div) class="arithmatex">\s*'
                   r'(?:\\\((?P<inline>.*?)\\\)|\\\[(?P<block>.*?)\\\])\s*</(?P=tag)>', re.S)


def to_mathml(html_text: str, where: str = "page") -> str:
    """`html_text` with every arithmatex formula replaced by its MathML."""
    from latex2mathml.converter import convert

    def replace(match: re.Match[str]) -> str:
        block = match["block"] is not None
        tex = html.unescape(match["block"] if block else match["inline"]).strip()
        try:
            mathml = convert(tex, display="block" if block else "inline")
        except Exception as exc:  # latex2mathml raises its own errors and plain ones
            raise ValueError(f"{where}: cannot render the formula {tex!r} as MathML "
                             f"({type(exc).__name__}: {exc})") from None
        unknown = _UNKNOWN.search(mathml)
        if unknown:
            raise ValueError(f"{where}: the formula {tex!r} uses {unknown[1]}, which latex2mathml "
                             "does not know")
        return f'<div class="math-block">{mathml}</div>' if block else mathml

    return _MATH.sub(replace, html_text)


def on_page_content(html_text: str, page: Any, **_: Any) -> str:
    """MkDocs calls this with each page's HTML, before the theme wraps it."""
    return to_mathml(html_text, page.file.src_path)
