"""The Guarantees page (docs/explanation/guarantees.md) names, for each promise, the tests
that prove it, by pytest node id. These tests fail when a named test file or test is
gone, or when a promise names no test, so the page cannot point at a proof that no
longer runs.

A test is named `path.py::test_name` (a function of that module) or
`path.py::TestClass::test_name` (a method of the class, its own or inherited, as the
conformance suite's tests are in tests/eventstore/test_conformance.py).
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "explanation" / "guarantees.md"

CITED = re.compile(r"`(?P<path>[\w./-]+\.py)::(?P<name>\w+(?:::\w+)?)`")
"""A test named in a page, as its node id in backquotes."""
SECTION = re.compile(r"^## +(?P<title>.+?) *$", re.MULTILINE)
NOT_PROMISES = frozenset({"Reading this page", "What is not promised"})
"""The page's sections that are not promises, and so name no test of their own."""


def citations(text: str) -> list[tuple[str, str]]:
    """The tests `text` names: (path, name), `name` possibly `Class::test`."""
    return [(found["path"], found["name"]) for found in CITED.finditer(text)]


def sections(text: str) -> dict[str, str]:
    """Each second-level section's title and its text, up to the next one."""
    heads = list(SECTION.finditer(text))
    ends = [head.start() for head in heads[1:]] + [len(text)]
    return {head["title"]: text[head.end() : end] for head, end in zip(heads, ends, strict=True)}


def _defines(body: list[ast.stmt], name: str) -> bool:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    return any(isinstance(node, functions) and node.name == name for node in body)


def problem(path: str, name: str) -> str | None:
    """What is wrong with the test `path::name`, or None when pytest would find it."""
    file = ROOT / path
    if not file.is_file():
        return f"{path}: no such file"
    *owner, test = name.split("::")
    if not test.startswith("test_"):
        return f"{path}::{name}: {test} is no test pytest collects (not test_...)"
    tree = ast.parse(file.read_text(encoding="utf-8"), str(file))
    if not owner:
        return None if _defines(tree.body, test) else f"{path}: no function {test}"
    (cls,) = owner
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    if not found or not cls.startswith("Test"):
        return f"{path}: no test class {cls}"
    if _defines(found[0].body, test):
        return None
    # Inherited, as the shipped conformance suite's tests are: ask the class itself.
    module = importlib.import_module(".".join(Path(path).with_suffix("").parts))
    if callable(getattr(getattr(module, cls), test, None)):
        return None
    return f"{path}: {cls} has no test {test}"


def test_every_test_the_guarantees_page_names_exists() -> None:
    named = citations(PAGE.read_text(encoding="utf-8"))
    assert len(named) > 50, "the page names fewer tests than it did: is CITED still right?"
    problems = [found for path, name in named if (found := problem(path, name))]
    assert problems == [], "\n".join(problems)


def test_every_promise_on_the_guarantees_page_names_a_test() -> None:
    found = sections(PAGE.read_text(encoding="utf-8"))
    assert found.keys() >= NOT_PROMISES
    promises = {title: text for title, text in found.items() if title not in NOT_PROMISES}
    assert len(promises) >= 12
    assert [title for title, text in promises.items() if not citations(text)] == []


def test_the_check_names_what_is_gone_and_passes_what_is_there() -> None:
    here = "tests/docs/test_guarantees.py"
    conformance = "tests/eventstore/test_conformance.py"
    inherited = (
        "TestEveryBackend::test_a_retried_append_returns_the_first_result_and_writes_nothing"
    )
    assert problem(here, "test_the_check_names_what_is_gone_and_passes_what_is_there") is None
    assert problem(conformance, inherited) is None
    assert (
        problem("tests/docs/no_such_file.py", "test_x")
        == "tests/docs/no_such_file.py: no such file"
    )
    assert problem(here, "test_no_such_test") == f"{here}: no function test_no_such_test"
    assert (
        problem(here, "problem")
        == f"{here}::problem: problem is no test pytest collects (not test_...)"
    )
    assert (
        problem(conformance, "TestNoSuchClass::test_x")
        == f"{conformance}: no test class TestNoSuchClass"
    )
    assert problem(conformance, "TestEveryBackend::test_gone") == (
        f"{conformance}: TestEveryBackend has no test test_gone"
    )
    page = "## A promise\n\n- `tests/a.py::test_b`\n- `tests/c.py::TestD::test_e`: why.\n"
    assert citations(page) == [("tests/a.py", "test_b"), ("tests/c.py", "TestD::test_e")]
    assert sections(page + "## Another\n\nnone\n") == {
        "A promise": page.removeprefix("## A promise"),
        "Another": "\n\nnone\n",
    }
