"""Every ```python block in docs/ and the README runs as a reader would paste it
(tests/docs_blocks.py says how): a page whose example stopped working fails here, naming the
page and line. New pages are picked up by themselves."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from docs_blocks import BlockFailed, python_blocks, run_page, skip_markers

pytestmark = pytest.mark.kernel_free
"""Nothing here a CPU's kernels could change: the other-CPU pass (.ci/run) skips it."""

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = sorted(p for p in [REPO / "README.md", *DOCS.rglob("*.md")]
               if python_blocks(p.read_text(encoding="utf-8")))


def _name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


@pytest.fixture
def reader_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty working folder on sys.path, with the world registry, the modules a page
    imports from the folder and the plotting backend restored afterwards."""
    from pacplan.worlds import base

    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # a page's worlds stay here
    monkeypatch.setenv("MPLBACKEND", "Agg")
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        module = sys.modules.get(name)
        if str(getattr(module, "__file__", "") or "").startswith(str(tmp_path) + os.sep):
            del sys.modules[name]


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_page_code_runs(page: Path, reader_folder: Path) -> None:
    run_page(page, reader_folder, label=_name(page))


def test_the_docs_have_code_and_skip_it_rarely_and_with_a_reason() -> None:
    blocks = [b for p in PAGES for b in python_blocks(p.read_text(encoding="utf-8"))]
    assert len(PAGES) >= 5 and len(blocks) >= 12
    skipped = [b for b in blocks if b.skip is not None]
    assert len(skipped) <= len(blocks) // 4, "skip-test is for code that needs a robot"
    for page in [REPO / "README.md", *DOCS.rglob("*.md")]:
        text = page.read_text(encoding="utf-8")
        marked = {b.line for b in python_blocks(text) if b.skip is not None}
        for line, reason in skip_markers(text):
            assert reason, f"{_name(page)}:{line}: skip-test needs a reason"
            following = [b.line for b in python_blocks(text) if b.line > line]
            assert following and following[0] in marked, (
                f"{_name(page)}:{line}: a skip-test marker must come right before a "
                "```python block")


PAGE = """# A page

Some text.

```python
# helper.py
VALUE = 41
```

```python
from helper import VALUE
answer = VALUE + 1
```

```yaml
not: python
```

<!-- skip-test: needs a robot -->
```python
robot.fly()
```

- a list item with an indented example:

    ```python
    answer += 1
    ```
"""


def test_the_runner_runs_blocks_in_order_in_one_namespace(reader_folder: Path) -> None:
    page = reader_folder / "page.md"
    page.write_text(PAGE, encoding="utf-8")
    blocks = python_blocks(PAGE)
    assert [(b.line, b.module, b.skip) for b in blocks] == [
        (5, "helper.py", None), (10, None, None), (20, None, "needs a robot"), (26, None, None)]
    namespace = run_page(page, reader_folder)
    assert namespace["answer"] == 43  # 41 + 1 + 1: the skipped block did not run
    assert (reader_folder / "helper.py").read_text(encoding="utf-8") == "# helper.py\nVALUE = 41\n"


def test_the_runner_fails_when_a_block_raises(reader_folder: Path) -> None:
    page = reader_folder / "broken.md"
    page.write_text(PAGE.replace("answer = VALUE + 1", "answer = VALUE / 0"), encoding="utf-8")
    with pytest.raises(BlockFailed, match=r"broken\.md: the block at line 10 raised "
                                          r"ZeroDivisionError"):
        run_page(page, reader_folder)
