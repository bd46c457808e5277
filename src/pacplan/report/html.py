"""report.html: the report's Markdown as one self-contained HTML page (figures embedded).

The Markdown is rendered by markdown-it-py (CommonMark with pipe tables, raw HTML off), the
ecosystem's parser, rather than a converter of pacplan's own. What a library cannot know is kept
here: every image is read from the run directory (never outside it) and embedded as a base64
`data:` URI in a <figure> with its caption, and the style sheet is inline, so the page
references no other file and no network address: it can be mailed or attached as it is.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt

from pacplan.errors import PacplanError

_MIME = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".svg": "image/svg+xml"}

STYLE = """
body { font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #1b1f24; max-width: 1180px; margin: 2em auto; padding: 0 1.2em; }
h1 { font-size: 1.6em; border-bottom: 2px solid #d0d7de; padding-bottom: .25em; }
h2 { font-size: 1.25em; margin-top: 1.8em; border-bottom: 1px solid #d0d7de; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; margin: .8em 0; font-size: .92em; }
th, td { border: 1px solid #d0d7de; padding: .3em .65em; }
th { background: #f3f5f7; }
tr:nth-child(even) td { background: #fafbfc; }
td { font-variant-numeric: tabular-nums; }
code { font: .9em ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
       background: #f3f5f7; padding: .1em .3em; border-radius: 3px; }
pre { background: #f3f5f7; padding: .8em; overflow-x: auto; border-radius: 4px; }
pre code { background: none; padding: 0; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; border: 1px solid #e4e7eb; }
figcaption { color: #57606a; font-size: .9em; }
"""


def embed_image(base: Path, rel: str) -> str:
    """The image file `rel` (inside `base`) as a data: URI."""
    path = (base / rel).resolve()
    if not path.is_relative_to(base.resolve()):
        raise PacplanError(f"report image {rel!r} lies outside {base}; it cannot be embedded")
    mime = _MIME.get(path.suffix.lower())
    if mime is None:
        raise PacplanError(f"report image {rel!r}: unknown image type {path.suffix!r}")
    if not path.is_file():
        raise PacplanError(f"report image {rel!r} is missing from {base}")
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _renderer(base: Path) -> MarkdownIt:
    """CommonMark + tables, no raw HTML; an image is a <figure> with its data: URI and caption."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")

    def image(self: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        alt = self.renderInlineAsText(token.children or [], options, env)
        src = embed_image(base, str(token.attrGet("src") or ""))
        return (f'<figure><img alt="{html.escape(alt)}" src="{src}">'
                f"<figcaption>{html.escape(alt)}</figcaption></figure>")

    md.add_render_rule("image", image)
    return md


def _unwrap_figures(tokens: list[Any]) -> None:
    """A paragraph holding one image only renders as the <figure> alone (no <p> around it)."""
    for i, token in enumerate(tokens[:-2]):
        inline = tokens[i + 1]
        if token.type == "paragraph_open" and inline.type == "inline" and \
                [c.type for c in inline.children or []] == ["image"]:
            token.hidden = tokens[i + 2].hidden = True


def markdown_to_html(text: str, base: str | Path, title: str) -> str:
    """A complete HTML page of the report's Markdown `text`; images are read from `base`."""
    md = _renderer(Path(base))
    tokens = md.parse(text)
    _unwrap_figures(tokens)
    body = md.renderer.render(tokens, md.options, {})
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n{body}</body>\n</html>\n")
