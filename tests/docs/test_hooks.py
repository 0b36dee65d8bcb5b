"""The documentation build's hooks: sections by folder, and the docstrings' `::` blocks."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from .reference import DOCS, docs_hooks


def _docstrings() -> ModuleType:
    docs_hooks()  # skips the test, saying why, when the docs extra is missing
    spec = importlib.util.spec_from_file_location("docstring_hooks", DOCS / "hooks_docstrings.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_section_lists_its_index_then_the_pages_it_links_then_the_others(tmp_path: Path) -> None:
    hooks = docs_hooks()
    (tmp_path / "guide").mkdir()
    for name in ("a.md", "b.md", "c.md", "index.md"):
        (tmp_path / "guide" / name).write_text(f"# {name}\n")
    (tmp_path / "guide" / "index.md").write_text("[B](b.md), then [A](a.md#top), [B](b.md)\n")
    assert hooks.folder_pages(tmp_path, "guide/") == [
        "guide/index.md",
        "guide/b.md",
        "guide/a.md",
        "guide/c.md",
    ]


def test_a_section_whose_folder_holds_no_page_is_left_out(tmp_path: Path) -> None:
    hooks = docs_hooks()
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "index.md").write_text("# Guide\n")
    nav = [
        {"Home": "index.md"},
        {"Guide": "guide/"},
        {"Benchmarks": "benchmarks/"},
        {"More": ["explanation/", {"Map": "MAP.md"}]},
    ]
    assert list(hooks._expanded(nav, tmp_path)) == [
        {"Home": "index.md"},
        {"Guide": ["guide/index.md"]},
        {"More": [{"Map": "MAP.md"}]},
    ]


def test_a_literal_block_becomes_a_fenced_one_in_python_or_text() -> None:
    fenced = _docstrings().fenced
    text = "Open it::\n\n    store = open()\n    store.close()\n\nThen more."
    assert fenced(text) == (
        "Open it:\n\n```python\nstore = open()\nstore.close()\n```\n\nThen more."
    )
    tree = "The errors.\n\n::\n\n    Base\n    ├── Child    when\n"
    assert fenced(tree) == "The errors.\n\n```text\nBase\n├── Child    when\n```\n"
    assert fenced("A ratio 1::2 stays.") == "A ratio 1::2 stays."
