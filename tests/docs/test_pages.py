"""Every python block of the documentation runs, and prints what its page says it prints.

One test a page (docs/**/*.md with a python block): its blocks run in order, in one
namespace, as a file run with `python page.py` would (`__name__ == "__main__"`, no
`from __future__` of this module), in a fresh empty folder. A block's
`<!-- needs: ... -->` marks its page: `postgres` replaces the URL the page shows
(`pages.POSTGRES_URL`) with one to a fresh schema on the test server; `spark` gives the
page the run's one SparkSession (its `spark_session(...)` finds it); `broker` needs
RabbitMQ and NATS. Without them the page is skipped here and fails in CI (`missing`).
The rules a page follows are in pages.py; the last tests check that the runner keeps
them.
"""

from __future__ import annotations

import socket
import sys
import types
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from ..conftest import missing
from .pages import POSTGRES_URL, Page, PageError, printed_lines, read_page

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"


def _pages() -> list[Page]:
    pages = []
    for path in sorted(DOCS.rglob("*.md")):
        try:
            page = read_page(path)
        except PageError:
            continue  # named by the rules' test below, not an error of the whole module
        if page.examples:
            pages.append(page)
    return pages


def _param(page: Page) -> object:
    needs = sorted(page.needs)
    marks = [getattr(pytest.mark, need) for need in needs]
    if "spark" in needs:
        marks.append(pytest.mark.xdist_group("spark"))  # the worker's one SparkSession
    return pytest.param(page, marks=marks, id=page.path.relative_to(DOCS).as_posix())


def run_page(
    page: Page,
    folder: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    pg_url: str | None = None,
) -> list[tuple[int, list[str], list[str]]]:
    """Runs `page`'s examples in `folder`; for each block with a prints block, its line,
    what it printed and what the page says it prints (as `printed_lines` has them)."""
    monkeypatch.chdir(folder)
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)  # as `python page.py` runs it
    checked = []
    for example in page.examples:
        code = example.code.replace(POSTGRES_URL, pg_url) if pg_url else example.code
        # Padded so that a traceback names the page's own line.
        compiled = compile("\n" * example.line + code, str(page.path), "exec", dont_inherit=True)
        capsys.readouterr()
        exec(compiled, main.__dict__)
        out = capsys.readouterr().out
        if example.prints is not None:
            shown = out.replace(pg_url, POSTGRES_URL) if pg_url else out
            checked.append((example.line, printed_lines(shown), printed_lines(example.prints)))
    return checked


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
    pg_url = str(request.getfixturevalue("pg_url")) if "postgres" in page.needs else None
    if "spark" in page.needs:
        request.getfixturevalue("spark")
    if "broker" in page.needs:
        from ..messaging.brokers import NATS_URL, RABBITMQ_URL

        _reachable(RABBITMQ_URL, 5672)
        _reachable(NATS_URL, 4222)
    for line, printed, says in run_page(page, tmp_path, monkeypatch, capsys, pg_url):
        assert printed == says, f"{page.path}:{line}: the block printed other than its page says"


def test_every_page_follows_the_rules_its_examples_run_by() -> None:
    """A page that breaks them (a prints block after no python block, an unknown need) is
    named here even when it has no example to run."""
    for path in sorted(DOCS.rglob("*.md")):
        read_page(path)  # raises PageError


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
        (3, ["total 5"], ["total 5"]),
        (20, ["10 __main__"], ["10 __main__"]),
    ]
    assert [p.name for p in tmp_path.iterdir()] == ["made.txt"]


def test_the_runner_reports_what_a_block_printed_when_it_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = read_page(Path("page.md"), PAGE.replace("total 5\n", "total 6\n"))
    ((line, printed, says), _) = run_page(page, tmp_path, monkeypatch, capsys)
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
    ((_, printed, says),) = run_page(page, tmp_path, monkeypatch, capsys, fresh)
    assert printed == says == [f"True {POSTGRES_URL}"]


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
    ],
)
def test_a_page_that_breaks_the_rules_is_refused(text: str, says: str) -> None:
    with pytest.raises(PageError, match=says):
        read_page(Path("page.md"), text)
