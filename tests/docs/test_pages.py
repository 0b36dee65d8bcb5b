"""Every python block of the documentation runs, and prints what its page says it prints.

One test a page (docs/**/*.md with a python block): its blocks run in order, in one
namespace, as a file run with `python page.py` would (`__name__ == "__main__"`, no
`from __future__` of this module), in a fresh empty folder, with the folder first on
`sys.path` (as the reader's prompt has it). A block titled with a file
(```` ```python title="shop.py" ````) is added to that file; a page that
`<!-- continues: ... -->` another runs after it (and the pages before it) in the same
folder, each in a namespace of its own (pages.py says why). A block's
`<!-- needs: ... -->` marks its page: `postgres` replaces the URL the page shows
(`pages.POSTGRES_URL`) with one to a fresh schema on the test server; `spark` gives the
page the run's one SparkSession (its `spark_session(...)` finds it); `broker` needs
RabbitMQ and NATS. Without them the page is skipped here and fails in CI (`missing`).
The rules a page follows are in pages.py; the last tests check that the runner keeps
them.
"""

from __future__ import annotations

import importlib
import socket
import sys
import types
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ..conftest import missing
from .pages import POSTGRES_URL, Example, Page, PageError, chain, printed_lines, read_page

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"


def _pages() -> list[Page]:
    pages = []
    for path in sorted(DOCS.rglob("*.md")):
        try:
            page = read_page(path)
            chain(page)
        except PageError:
            continue  # named by the rules' test below, not an error of the whole module
        if page.examples:
            pages.append(page)
    return pages


def needs_of(page: Page) -> frozenset[str]:
    """What `page` needs, with what the pages it continues need: its test runs them too."""
    return frozenset().union(*(earlier.needs for earlier in chain(page)))


def _param(page: Page) -> object:
    needs = sorted(needs_of(page))
    marks = [getattr(pytest.mark, need) for need in needs]
    if "spark" in needs:
        marks.append(pytest.mark.xdist_group("spark"))  # the worker's one SparkSession
    return pytest.param(page, marks=marks, id=page.path.relative_to(DOCS).as_posix())


Checked = tuple[Path, int, list[str], list[str]]


def run_page(
    page: Page,
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    pg_url: str | None = None,
) -> list[Checked]:
    """Runs the pages `page` continues, then `page`, in `folder`; for each block with a
    prints block, its page, its line, what it printed and what the page says it prints (as
    `printed_lines` has them)."""
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    checked: list[Checked] = []
    pickled: dict[str, types.ModuleType] = {}
    try:
        for each in chain(page):
            _forget_modules(folder)  # a new prompt imports the folder's files afresh
            checked += _run_one(each, folder, monkeypatch, capsys, pg_url, pickled)
    finally:
        _forget_modules(folder)  # the next test's folder has modules of the same names
        if pickled:
            from pyspark import cloudpickle

            for module in pickled.values():
                cloudpickle.unregister_pickle_by_value(module)  # type: ignore[no-untyped-call]
    return checked


def _run_one(
    page: Page,
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    pg_url: str | None,
    pickled: dict[str, types.ModuleType],
) -> list[Checked]:
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)  # as `python page.py` runs it
    checked: list[Checked] = []
    changed: set[str] = set()  # the modules whose files this page changed
    for example in page.examples:
        code = example.code.replace(POSTGRES_URL, pg_url) if pg_url else example.code
        if example.file is not None:
            changed.add(_write(page, example, code, folder))
            continue
        # Padded so that a traceback names the page's own line.
        compiled = compile("\n" * example.line + code, str(page.path), "exec", dont_inherit=True)
        capsys.readouterr()
        exec(compiled, main.__dict__)
        out = capsys.readouterr().out
        changed -= set(sys.modules)  # imported since: what the page added ran
        _pickle_by_value(folder, pickled)
        if example.prints is not None:
            shown = out.replace(pg_url, POSTGRES_URL) if pg_url else out
            checked.append(
                (page.path, example.line, printed_lines(shown), printed_lines(example.prints))
            )
    for name in sorted(changed):
        # Added to after the page's last import of it (for a command the page runs, in a
        # process of its own): imported here, so that what was added runs all the same.
        importlib.import_module(name)
    return checked


def _write(page: Page, example: Example, code: str, folder: Path) -> str:
    """Adds the block to its file (or replaces the line it names); the module's name."""
    assert example.file is not None
    target = folder / example.file
    target.parent.mkdir(parents=True, exist_ok=True)
    old = target.read_text(encoding="utf-8") if target.exists() else ""
    if example.replaces is None:
        new = f"{old}\n\n{code}" if old.strip() else code
    else:
        lines = old.split("\n")
        found = [i for i, row in enumerate(lines) if row.startswith(example.replaces)]
        if len(found) != 1:
            raise PageError(
                f"{page.path}:{example.line}: {example.file} has {len(found)} lines that "
                f"start with {example.replaces!r}; a `replaces:` block replaces one"
            )
        new = "\n".join([*lines[: found[0]], code.rstrip("\n"), *lines[found[0] + 1 :]])
    target.write_text(new, encoding="utf-8")
    name = ".".join(Path(example.file).with_suffix("").parts)
    sys.modules.pop(name, None)  # the next import reads the file as it is now
    importlib.invalidate_caches()
    return name


def _forget_modules(folder: Path) -> None:
    """Drops the modules imported from `folder`, as a new process has none of them."""
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and Path(file).resolve().is_relative_to(folder.resolve()):
            del sys.modules[name]


def _pickle_by_value(folder: Path, pickled: dict[str, types.ModuleType]) -> None:
    """Spark's workers get the folder's modules by value: the test run's one SparkSession
    started its workers elsewhere, where a reader's (started in the folder) import them."""
    if "pyspark.cloudpickle" not in sys.modules:
        return
    from pyspark import cloudpickle

    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if file and name not in pickled and Path(file).resolve().is_relative_to(folder.resolve()):
            # By its name, for its successors too.
            cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]
            pickled[name] = module


def _reachable(url: str, default_port: int) -> None:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port or default_port), 5).close()
    except OSError as error:
        missing(f"{url} is not reachable: {error}")


@pytest.mark.parametrize("page", [_param(page) for page in _pages()])
def test_a_page_runs_and_prints_what_it_says(
    page: Page,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
) -> None:
    needs = needs_of(page)
    pg_url = str(request.getfixturevalue("pg_url")) if "postgres" in needs else None
    if "spark" in needs:
        request.getfixturevalue("spark")
    if "broker" in needs:
        from ..messaging.brokers import NATS_URL, RABBITMQ_URL

        _reachable(RABBITMQ_URL, 5672)
        _reachable(NATS_URL, 4222)
    for path, line, printed, says in run_page(page, tmp_path, monkeypatch, capsys, pg_url):
        assert printed == says, f"{path}:{line}: the block printed other than its page says"


def test_every_page_follows_the_rules_its_examples_run_by() -> None:
    """A page that breaks them (a prints block after no python block, an unknown need) is
    named here even when it has no example to run."""
    for path in sorted(DOCS.rglob("*.md")):
        chain(read_page(path))  # raises PageError


PAGE = """\
# A page

```python
total = 2 + 3
print("total", total)
```

<!-- prints -->
```text
total 5
```

<!-- not run: a fragment -->
```python
raise SystemExit("never")
```

- In a list:

    ```python
    print(total * 2, __name__)
    open("made.txt", "w").close()
    ```

    <!-- prints -->
    ```text
    10 __main__
    ```
"""


def test_the_runner_runs_blocks_in_order_in_one_namespace_and_reads_their_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = read_page(Path("page.md"), PAGE)
    assert page.not_run == [(14, "a fragment")]
    checked = run_page(page, tmp_path, monkeypatch, capsys)
    assert checked == [
        (Path("page.md"), 3, ["total 5"], ["total 5"]),
        (Path("page.md"), 20, ["10 __main__"], ["10 __main__"]),
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["made.txt"]


def test_the_runner_reports_what_a_block_printed_when_it_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = read_page(Path("page.md"), PAGE.replace("total 5\n", "total 6\n"))
    ((_, line, printed, says), _) = run_page(page, tmp_path, monkeypatch, capsys)
    assert (line, printed, says) == (3, ["total 5"], ["total 6"])


def test_a_traceback_names_the_line_of_the_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = read_page(Path("page.md"), "# A page\n\n```python\nx = 1\n1 / 0\n```\n")
    with pytest.raises(ZeroDivisionError) as raised:
        run_page(page, tmp_path, monkeypatch, capsys)
    last = raised.traceback[-1]
    assert (str(last.path), last.lineno + 1) == ("page.md", 5)


def test_the_postgres_url_is_replaced_in_the_code_and_back_in_what_it_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (
        f'<!-- needs: postgres -->\n```python\nurl = "{POSTGRES_URL}"\n'
        'print(url.endswith("?schema=t_1"), url)\n```\n\n'
        f"<!-- prints -->\n```text\nTrue {POSTGRES_URL}\n```\n"
    )
    page = read_page(Path("page.md"), text)
    assert page.needs == {"postgres"}
    fresh = "postgresql://postgres@127.0.0.1:5432/test?schema=t_1"
    ((_, _, printed, says),) = run_page(page, tmp_path, monkeypatch, capsys, fresh)
    assert printed == says == [f"True {POSTGRES_URL}"]


PASTED_BADLY = "for n in range(2):\n    print(n)\nprint('after')\n"
"""Runs as a file; at a prompt the last line needs a blank line before it."""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("```python\nx = 1\n```\n\nA word.\n\n<!-- prints -->\n```text\n1\n```\n", "follow"),
        ("<!-- prints -->\n```text\n1\n```\n", "follow"),
        ("<!-- not run: -->\n```python\nx\n```\n", "say why"),
        ("<!-- not run: x -->\n```python\nx\n```\n<!-- prints -->\n```text\n1\n```\n", "not run"),
        ("<!-- needs: kafka -->\n```python\nx = 1\n```\n", "kafka"),
        ("<!-- need: postgres -->\n```python\nx = 1\n```\n", "may say"),
        (f"```python\nurl = '{POSTGRES_URL}'\n```\n", "needs: postgres"),
        ("```python\nx = 1\n```\n<!-- prints -->\n```python\nx\n```\n", "```text"),
        ('```python title="m.py"\nx = 1\n```\n<!-- prints -->\n```text\n1\n```\n', "m.py"),
        ('<!-- not run: x -->\n```python title="m.py"\nx = 1\n```\n', "imported"),
        ('```python title="../m.py"\nx = 1\n```\n', "not a file"),
        ('<!-- replaces: -->\n```python title="m.py"\nx = 1\n```\n', "line's start"),
        ("<!-- replaces: x = -->\n```python\nx = 2\n```\n", "file's title"),
        (f'```python title="m.py"\nurl = "{POSTGRES_URL}"\n```\n', "needs: postgres"),
        ("```python\nx = 1\n```\n<!-- continues: a.md -->\n", "above"),
        ("<!-- continues: a.md -->\n<!-- continues: b.md -->\n", "one page"),
        ("<!-- continues: a.md, b.md -->\n", "one page"),
        # On a page that builds a file, the blocks that run are pasted at a prompt.
        (f'```python title="m.py"\nx = 1\n```\n```python\n{PASTED_BADLY}```\n', "line 3 fails"),
        (f"<!-- continues: a.md -->\n```python\n{PASTED_BADLY}```\n", "line 3 fails"),
        (
            '```python title="m.py"\nx = 1\n```\n'
            "```python\nclass A:\n    x = 1\n\n    y = 2\n```\n",
            "line 4 fails",
        ),
    ],
)
def test_a_page_that_breaks_the_rules_is_refused(text: str, says: str) -> None:
    with pytest.raises(PageError, match=says):
        read_page(Path("page.md"), text)


FIRST = """\
# Adds to a module, then imports it
```python title="shop.py"
made = []


def make(thing):
    made.append(thing)
    return len(made)
```

```python
from shop import make

print(make("tea"), __name__)
with open("shop.db", "w") as db:
    db.write("tea\\n")
```

<!-- prints -->
```text
1 __main__
```
"""

SECOND = """\
<!-- continues: first.md -->
# Goes on

```python title="shop.py"
PRICES = {"tea": 3}
```

```python
import shop

with open("shop.db") as db:
    print(shop.make("cup"), shop.PRICES, "local" in dir(), db.read().strip())
```

<!-- prints -->
```text
1 {'tea': 3} False tea
```

<!-- replaces: PRICES = -->
```python title="shop.py"
PRICES = {"tea": 4}
with open("imported.txt", "w") as out:
    out.write(str(PRICES))
```
"""


def _two_pages(docs: Path, first: str = FIRST, second: str = SECOND) -> Page:
    (docs / "first.md").write_text(first)
    (docs / "second.md").write_text(second)
    return read_page(docs / "second.md")


def test_a_titled_block_is_added_to_its_file_and_runs_when_a_block_imports_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, folder = tmp_path / "docs", tmp_path / "run"
    docs.mkdir()
    folder.mkdir()
    (docs / "first.md").write_text(FIRST)
    page = read_page(docs / "first.md")
    assert [(e.line, e.file) for e in page.examples] == [(2, "shop.py"), (11, None)]
    checked = run_page(page, folder, monkeypatch, capsys)
    assert checked == [(docs / "first.md", 11, ["1 __main__"], ["1 __main__"])]
    assert (folder / "shop.py").read_text().startswith("made = []\n")
    assert "shop" not in sys.modules  # forgotten: the next test's folder has a shop.py too


def test_a_page_that_continues_another_runs_after_it_in_its_folder_in_a_fresh_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second page sees the first one's file (with its own addition) and database,
    not its namespace nor its imported module (`made` starts empty again)."""
    docs, folder = tmp_path / "docs", tmp_path / "run"
    docs.mkdir()
    folder.mkdir()
    page = _two_pages(docs, FIRST.replace("print(make", "local = 1\nprint(make"))
    assert page.continues == docs / "first.md"
    assert [p.path.name for p in chain(page)] == ["first.md", "second.md"]
    checked = run_page(page, folder, monkeypatch, capsys)
    assert [(path.name, line, printed == says) for path, line, printed, says in checked] == [
        ("first.md", 11, True),
        ("second.md", 8, True),
    ]
    shop = (folder / "shop.py").read_text()
    assert "PRICES = {'tea': 4}" not in shop and 'PRICES = {"tea": 4}' in shop
    assert 'PRICES = {"tea": 3}' not in shop
    # Replaced after the page's last import of shop.py: imported at the page's end.
    assert (folder / "imported.txt").read_text() == "{'tea': 4}"


def test_the_earlier_pages_prints_are_checked_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, folder = tmp_path / "docs", tmp_path / "run"
    docs.mkdir()
    folder.mkdir()
    page = _two_pages(docs, FIRST.replace("1 __main__\n```", "2 __main__\n```"))
    (first, _) = run_page(page, folder, monkeypatch, capsys)
    assert first == (docs / "first.md", 11, ["1 __main__"], ["2 __main__"])


def test_a_replaced_line_must_be_one_line_of_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs, folder = tmp_path / "docs", tmp_path / "run"
    docs.mkdir()
    folder.mkdir()
    page = _two_pages(docs, second=SECOND.replace("replaces: PRICES =", "replaces: COSTS ="))
    with pytest.raises(PageError, match="0 lines that start with 'COSTS ='"):
        run_page(page, folder, monkeypatch, capsys)


@pytest.mark.parametrize(
    ("first", "says"),
    [
        (None, "which is not there"),
        ("<!-- continues: second.md -->\n", "which continues it"),
    ],
)
def test_a_page_continues_a_page_that_is_there_and_does_not_lead_back_to_it(
    tmp_path: Path, first: str | None, says: str
) -> None:
    (tmp_path / "second.md").write_text(SECOND)
    if first is not None:
        (tmp_path / "first.md").write_text(first)
    with pytest.raises(PageError, match=says):
        chain(read_page(tmp_path / "second.md"))


def test_a_page_needs_what_the_pages_it_continues_need(tmp_path: Path) -> None:
    (tmp_path / "first.md").write_text("<!-- needs: postgres -->\n```python\nx = 1\n```\n")
    (tmp_path / "second.md").write_text("<!-- continues: first.md -->\n```python\ny = 1\n```\n")
    page = read_page(tmp_path / "second.md")
    assert page.needs == frozenset()
    assert needs_of(page) == {"postgres"}


def test_a_block_pasted_at_a_prompt_may_end_its_indented_blocks_with_a_blank_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a page's reader pastes, the prompt takes: a compound statement closed by a blank
    line, a `try` with its `except`, a string over several lines."""
    code = (
        "for n in range(2):\n    print(n)\n\ntry:\n    1 / 0\nexcept ZeroDivisionError:\n"
        '    print("zero")\n\ntext = """a\n\nb"""\nprint(len(text))\n'
    )
    text = f'```python title="m.py"\nx = 1\n```\n```python\n{code}```\n'
    prints = "<!-- prints -->\n```text\n0\n1\nzero\n4\n```\n"
    page = read_page(Path("page.md"), text + prints)
    ((_, _, printed, says),) = run_page(page, tmp_path, monkeypatch, capsys)
    assert printed == says == ["0", "1", "zero", "4"]
