"""Property: a string from outside (a file name, a config value, a JSON field) put into the
report through `pacplan.report.markdown` renders as its own characters and nothing else.

Oracle: markdown-it-py, the parser report.html is rendered with, here with raw HTML on (as
GitHub renders report.md) and pipe tables. For any string s, "before {text(s)} after" parses
to one paragraph of plain text whose characters are "before " + printable(s) + " after" (no
link, image, emphasis, code, HTML or line break), "before {code(s)} after" to that text around
one code span holding printable(s), and a table row with text(s) in a cell keeps its cells.
"""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from pacplan.report.markdown import code, printable, text

MD = MarkdownIt("commonmark", {"html": True}).enable("table")

# Markdown's own characters, weighted so that hostile strings are common, plus any character.
MARKUP = list("`*_[]()!<>&|#~$\\:/ \n\r\t\x00.-+=\"'ai")
HOSTILE = st.text(st.sampled_from(MARKUP) | st.characters(), max_size=40)
NAMES = ["z`[click me](mailto:a@b)`.safetensors", "![i](x)", "**bold**", "a|b", "<script>",
         "``", "` a `", " ", "  x  ", "&amp;", "&#60;b>", "\\", "x\\", "\\`", "a\nb", "# h #",
         "<http://x.y>", "__u__", "a._b_.", "~~s~~", "$x$", "[a]: /u", "\x00\x7f"]


def _inline(source: str) -> list[Any]:
    """The children of the single paragraph `source` parses to (fails on any other block)."""
    tokens = MD.parse(source)
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"], source
    return tokens[1].children or []


def _examples(test: Any) -> Any:
    for name in NAMES:
        test = example(name)(test)
    return test


@_examples
@settings(max_examples=400, deadline=None)
@given(HOSTILE)
def test_text_renders_as_its_characters_only(s: str) -> None:
    children = _inline(f"before {text(s)} after")
    assert {c.type for c in children} == {"text"}, [c.type for c in children]
    assert "".join(c.content for c in children) == f"before {printable(s)} after"


@_examples
@settings(max_examples=400, deadline=None)
@given(HOSTILE)
def test_code_is_one_code_span_of_its_characters(s: str) -> None:
    children = _inline(f"before {code(s)} after")
    shown = printable(s)
    if not shown:
        assert "".join(c.content for c in children) == "before  after"
        return
    assert [c.type for c in children] == ["text", "code_inline", "text"], children
    assert [c.content for c in children] == ["before ", shown, " after"]


@_examples
@settings(max_examples=300, deadline=None)
@given(HOSTILE)
def test_text_stays_in_its_table_cell(s: str) -> None:
    tokens = MD.parse(f"| a | b |\n|---|---|\n| {text(s)} | 2 |\n")
    types = [t.type for t in tokens]
    assert types.count("td_open") == 2 and "table_open" in types
    cells = [t for i, t in enumerate(tokens)
             if t.type == "inline" and tokens[i - 1].type == "td_open"]
    assert [c.type for c in cells[0].children or []] in ([], ["text"])
    shown = "".join(c.content for c in cells[0].children or [])
    # a cell trims the whitespace around its content
    assert shown.strip() == printable(s).strip() and cells[1].content == "2"


def test_ordinary_names_are_left_as_they_are() -> None:
    """The names a run usually has render unchanged, in Markdown too where nothing needs it."""
    assert text("toy-report") == "toy-report" and code("toy-metrics.jsonl") == \
        "`toy-metrics.jsonl`"
    assert text("max_slope_deg") == r"max\_slope\_deg"  # the same on the page
    assert printable("a\nb\tc\x7f") == "a␊b␉c␡"
