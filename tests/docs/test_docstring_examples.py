"""Every public name's docstring has one example, and every example runs.

The convention (issue 53): a paragraph of the docstring ends with a line that is just
`Example::`, and the indented block after it is the name's example, written as a user
would copy it: its own imports, a store it opens itself (SQLite in the current folder or
`memory://`), and `assert` lines where it shows a result. It runs here as a script does,
in a fresh namespace and an empty folder; top-level `await` is allowed (it then runs in
`asyncio.run`). A first line `# needs: postgres` (or `spark`, `broker`, comma-separated)
says what it needs beyond Python and SQLite; with `postgres` it names
`postgresql://postgres@localhost:5432/eventcraft`, which the test replaces with a fresh
schema on the test server. The site shows the block as Python (docs/hooks_docstrings.py).

Every public name has its example: a new name without one fails the test, naming it.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import re
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..conftest import missing
from .pages import NEEDS, POSTGRES_URL
from .reference import docs_hooks
from .test_reference import FACES, SHADOWED

_NEEDS_LINE = re.compile(r"^#\s*needs:\s*(?P<needs>.*)$")


@dataclass(frozen=True)
class DocExample:
    """A public name's example, as its docstring gives it."""

    face: str
    name: str
    code: str
    needs: frozenset[str]
    where: str
    """The file and line of the docstring's object, for a failure's message."""


def example_of(docstring: str) -> str | None:
    """The code of the block after the docstring's `Example::` line, dedented, if any."""
    lines = docstring.expandtabs().split("\n")
    for i, line in enumerate(lines):
        if line.strip() != "Example::":
            continue
        indent = len(line) - len(line.lstrip())
        start = i + 1
        while start < len(lines) and not lines[start].strip():
            start += 1
        end = start
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent
        ):
            end += 1
        code = textwrap.dedent("\n".join(lines[start:end])).strip("\n")
        return code + "\n" if code else None
    return None


def needs_of(code: str, where: str) -> frozenset[str]:
    """What an example's first line says it needs; a wrong need fails, naming it."""
    first = code.split("\n", 1)[0].strip()
    found = _NEEDS_LINE.match(first)
    needs = (
        frozenset(n.strip() for n in found["needs"].split(",") if n.strip())
        if found
        else frozenset()
    )
    unknown = needs - NEEDS
    assert not unknown, f"{where}: the example needs {sorted(unknown)}; it may need {NEEDS}"
    if POSTGRES_URL in code:
        assert "postgres" in needs, f"{where}: it names {POSTGRES_URL}: `# needs: postgres`"
    return needs


def _collection() -> object:
    """griffe's view of the faces, as the site's build has it (attribute docstrings too)."""
    import griffe

    tree = docs_hooks().package_tree()
    loader = griffe.GriffeLoader(search_paths=[str(tree)])
    loader.load("eventcraft", try_relative_path=False)
    loader.resolve_aliases(external=False, implicit=False)
    return loader.modules_collection


def _public_names(face: str) -> list[str]:
    import importlib

    module = importlib.import_module(face)
    return [n for n in getattr(module, "__all__", []) if not n.startswith("__")]


def examples() -> tuple[list[DocExample], dict[str, list[str]]]:
    """Every public name's example, and, by face, the names that have none."""
    import griffe

    collection = _collection()
    assert isinstance(collection, griffe.ModulesCollection)
    found: list[DocExample] = []
    lacking: dict[str, list[str]] = {}
    for face in sorted(FACES):
        module = collection.get_member(face)
        for name in _public_names(face):
            shadowed = SHADOWED.get(f"{face}.{name}")
            member = collection.get_member(shadowed) if shadowed else module[name]
            target = member.final_target if isinstance(member, griffe.Alias) else member
            docstring = target.docstring.value if target.docstring else ""
            code = example_of(docstring)
            if code is None:
                lacking.setdefault(face, []).append(name)
                continue
            where = f"{Path(str(target.filepath)).name}:{target.lineno} ({face}.{name})"
            found.append(DocExample(face, name, code, needs_of(code, where), where))
    return found, lacking


def _collect() -> tuple[list[DocExample], dict[str, list[str]]]:
    try:
        import griffe  # noqa: F401
    except ImportError:
        return [], {}  # the docs extra is not installed: the test below says so
    return examples()


_EXAMPLES, _LACKING = _collect()


def _param(example: DocExample) -> object:
    marks = [getattr(pytest.mark, need) for need in sorted(example.needs)]
    if "spark" in example.needs:
        marks.append(pytest.mark.xdist_group("spark"))  # the worker's one SparkSession
    return pytest.param(example, marks=marks, id=f"{example.face}.{example.name}")


def run_example(code: str, folder: Path, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Runs an example as a script in `folder`, awaiting it if it awaits."""
    monkeypatch.chdir(folder)
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    compiled = compile(code, where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    result = eval(compiled, main.__dict__)
    if inspect.iscoroutine(result):
        asyncio.run(result)


def with_test_url(code: str, pg_url: str) -> str:
    """`code` with the example's URL made the test's: options the example gives after
    it (`?pool_size=1`) are kept, joined to the test's own `?schema=`."""
    return code.replace(POSTGRES_URL + "?", pg_url + "&").replace(POSTGRES_URL, pg_url)


@pytest.fixture
def docs_extra() -> Iterator[None]:
    try:
        import griffe  # noqa: F401
    except ImportError as error:
        missing(f"the docs extra is not installed ({error}): pip install -e '.[docs]'")
    yield


@pytest.mark.parametrize("example", [_param(e) for e in _EXAMPLES])
def test_a_public_names_example_runs(
    example: DocExample,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    code = example.code
    if "postgres" in example.needs:
        code = with_test_url(code, str(request.getfixturevalue("pg_url")))
    if "spark" in example.needs:
        request.getfixturevalue("spark")
    run_example(code, tmp_path, monkeypatch, example.where)


@pytest.mark.parametrize("face", sorted(FACES))
def test_every_public_name_has_an_example(face: str, docs_extra: None) -> None:
    lacking = sorted(_LACKING.get(face, []))
    assert not lacking, f"{face}: public names without an `Example::` block: {', '.join(lacking)}"


DOCSTRING = """A thing.

    Example::

        # needs: postgres
        url = "postgresql://postgres@localhost:5432/eventcraft"

    Not the example.
    """


def test_the_example_is_the_block_after_the_example_line() -> None:
    code = example_of(inspect.cleandoc(DOCSTRING))
    assert code == f'# needs: postgres\nurl = "{POSTGRES_URL}"\n'
    assert needs_of(code, "here") == {"postgres"}
    assert example_of("A thing.\n\nUse it so::\n\n    x = 1\n") is None


def test_an_example_naming_postgres_without_needing_it_is_refused() -> None:
    with pytest.raises(AssertionError, match="needs: postgres"):
        needs_of(f'url = "{POSTGRES_URL}"\n', "here")
    with pytest.raises(AssertionError, match="kafka"):
        needs_of("# needs: kafka\nx = 1\n", "here")


def test_an_example_that_awaits_is_awaited_and_a_failing_one_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code = "import asyncio\nawait asyncio.sleep(0)\nopen('ran', 'w').close()\n"
    run_example(code, tmp_path, monkeypatch, "here")
    assert (tmp_path / "ran").exists()
    with pytest.raises(AssertionError):
        run_example("assert 1 + 1 == 3\n", tmp_path, monkeypatch, "here")


def test_the_test_url_keeps_the_options_an_example_gives() -> None:
    test_url = "postgresql://postgres@127.0.0.1:5432/test?schema=t_1"
    code = f'a = "{POSTGRES_URL}?pool_size=1"\nb = "{POSTGRES_URL}"\n'
    assert with_test_url(code, test_url) == (f'a = "{test_url}&pool_size=1"\nb = "{test_url}"\n')
