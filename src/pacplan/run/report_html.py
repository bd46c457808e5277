"""report.html: the report's Markdown as one self-contained HTML page (figures embedded).

A tiny converter for exactly the constructs `pacplan.run.report` emits: headings, paragraphs,
pipe tables (with their alignment row), bullet lists, fenced code, images alone on a line, and
inline `code`, **bold** and *italic*. Every image is read from the run directory and embedded as a
base64 `data:` URI, and the style sheet is inline, so the page references no other file and no
network address: it can be mailed or attached as it is.
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

from pacplan.errors import PacplanError

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")
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


def _inline(text: str) -> str:
    """Escape `text` and render its `code` spans, **bold** and *italic* runs."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unmatched backtick stays a backtick
        parts[-2:] = ["`".join(parts[-2:])]
    out = []
    for i, part in enumerate(parts):
        if i % 2:
            out.append(f"<code>{html.escape(part)}</code>")
        else:
            bold = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", html.escape(part))
            out.append(re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", bold))
    return "".join(out)


def _cells(line: str) -> list[str]:
    """The cells of a pipe-table row."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _alignments(separator: str) -> list[str]:
    """CSS text-align of each column from the row of dashes (`---:` right, `:---:` centre)."""
    aligns = []
    for cell in _cells(separator):
        if cell.startswith(":") and cell.endswith(":"):
            aligns.append("center")
        elif cell.endswith(":"):
            aligns.append("right")
        else:
            aligns.append("left")
    return aligns


def _is_separator(line: str) -> bool:
    return line.strip().startswith("|") and all(
        re.fullmatch(r":?-{3,}:?", c) for c in _cells(line))


def _table(rows: list[str]) -> str:
    aligns = _alignments(rows[1])

    def row(line: str, tag: str) -> str:
        cells = _cells(line)
        return "<tr>" + "".join(
            f'<{tag} style="text-align:{aligns[i] if i < len(aligns) else "left"}">'
            f"{_inline(c)}</{tag}>" for i, c in enumerate(cells)) + "</tr>"

    body = "\n".join(row(r, "td") for r in rows[2:])
    return f"<table>\n<thead>{row(rows[0], 'th')}</thead>\n<tbody>\n{body}\n</tbody>\n</table>"


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


def markdown_to_html(text: str, base: str | Path, title: str) -> str:
    """A complete HTML page of the report's Markdown `text`; images are read from `base`."""
    base = Path(base)
    lines = text.splitlines()
    out: list[str] = []
    para: list[str] = []
    items: list[str] = []

    def flush() -> None:
        if para:
            out.append(f"<p>{_inline(' '.join(para))}</p>")
            para.clear()
        if items:
            out.append("<ul>\n" + "\n".join(f"<li>{_inline(i)}</li>" for i in items) + "\n</ul>")
            items.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            flush()
            j = i + 1
            while j < len(lines) and not lines[j].strip().startswith("```"):
                j += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(lines[i + 1:j]))}</code></pre>")
            i = j + 1
            continue
        if stripped.startswith("|") and i + 1 < len(lines) and _is_separator(lines[i + 1]):
            flush()
            j = i + 2
            while j < len(lines) and lines[j].strip().startswith("|"):
                j += 1
            out.append(_table(lines[i:j]))
            i = j
            continue
        heading = re.match(r"(#{1,6})\s+(.*)", stripped)
        image = _IMAGE.fullmatch(stripped)
        if heading:
            flush()
            level = len(heading.group(1))
            out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif image:
            flush()
            alt, rel = image.groups()
            out.append(f'<figure><img alt="{html.escape(alt)}" src="{embed_image(base, rel)}">'
                       f"<figcaption>{_inline(alt)}</figcaption></figure>")
        elif stripped.startswith("- "):
            if para:
                flush()
            items.append(stripped[2:])
        elif not stripped:
            flush()
        elif items:  # a list item's continuation line
            items[-1] += " " + stripped
        else:
            para.append(stripped)
        i += 1
    flush()
    body = "\n".join(out)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n"
            f"<body>\n{body}\n</body>\n</html>\n")
