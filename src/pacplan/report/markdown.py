"""Strings from outside (file names, config values, JSON fields) put into the report's Markdown.

A file name, a world option or a field of an unhashed JSON file is data, not Markdown: written
into report.md as it is, a backtick closes the code span around it, `[x](y)` becomes a link,
`![i](x)` an image the report then fails to embed, `**` emphasis, `<b>` raw HTML (on GitHub),
and `|` a new table cell. `text` and `code` write such a string so that it renders as exactly
its own characters (control characters shown as their Unicode control pictures, since a line
break would end the paragraph or table row it is in), wherever inside a line it is put.
"""

from __future__ import annotations

import re

# ASCII punctuation that opens or closes an inline construct in CommonMark (\ ` * _ [ ] < > &
# !), a table cell in GFM (|), a heading's closing sequence (#), or GitHub's strikethrough and
# math (~ $). Each is escaped with a backslash, which renders as the character itself.
_SPECIAL = re.compile(r"([\\`*_\[\]<>&!|#~$])")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_BACKTICKS = re.compile(r"`+")


def printable(s: str) -> str:
    """`s` with each control character (C0 and DEL: a line break, a tab, NUL) replaced by its
    Unicode control picture (U+2400 + code, ␡ for DEL): what `text` and `code` show."""
    return _CONTROL.sub(lambda m: chr(0x2421 if m.group() == "\x7f" else 0x2400 + ord(m.group())),
                        s)


def text(s: object) -> str:
    """`s` (its str) as Markdown inline text that renders as `printable(s)` and nothing else:
    no link, image, emphasis, code, entity, HTML or table-cell break. For use inside a line,
    a paragraph or a table cell (a cell trims the spaces around its content)."""
    return _SPECIAL.sub(r"\\\1", printable(str(s)))


def code(s: object) -> str:
    """`s` (its str) as a Markdown code span showing `printable(s)` verbatim (CommonMark: the
    fence is one backtick longer than the longest run inside, and a space pads each side when
    the content starts or ends with a backtick, or with a space at both ends, since the parser
    strips one there). The empty string is written as nothing. Not for a table cell: there a
    `|` ends the cell even inside a code span; use `text`."""
    content = printable(str(s))
    if not content:
        return ""
    fence = "`" * (1 + max((len(run) for run in _BACKTICKS.findall(content)), default=0))
    pad = (content[0] == "`" or content[-1] == "`"
           or (content[0] == " " and content[-1] == " " and content.strip(" ") != ""))
    return f"{fence} {content} {fence}" if pad else f"{fence}{content}{fence}"
