"""The README's main command and its code snippets keep working."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from examples import courses, demo

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_demo_runs_end_to_end_on_sqlite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    demo.main(tmp_path / "demo")
    out = capsys.readouterr().out
    assert "passes the overdraft limit of 1000" in out
    assert "Wrong expected version: 4 (stream: 'account-ann', stream version: 5)" in out
    # 2500 + 1200 + 300 - 500 - 700, and the upcast legacy deposit of 12.50
    assert "balance 4050 cents at version 7 (loaded from the snapshot at version 5)" in out
    assert "order-42 is shipped, order-43 is cancelled" in out
    assert "correlation=checkout-42 user=warehouse" in out
    assert "high-water mark: 14" in out
    # The read models, kept live by projections from the same log.
    assert "ann   Ann     4050 cents" in out and "bob   Bob     4200 cents" in out
    assert "bob   shipped    order 42 (2 lines, 1600 cents)" in out
    assert "projection orders-by-customer: checkpoint 16 of 16, lag 0 events" in out
    assert "rebuilt account-balances from 9 events into generation 2, checkpoint 16" in out
    # Order fulfilment as a saga: one completes, one is undone in reverse.
    assert "saga order-42: completed" in out
    assert "saga order-43: compensated because step arrange_shipping failed" in out
    assert "payments was asked: charge {'cents': 1600, 'for_': 'reserve-1'}" in out
    assert "refund {'cents': 1600}" in out
    # Course subscriptions: rules across streams, kept by conditional appends.
    assert "refused: course 'algebra' is full (2 students)" in out
    assert "refused: the user name 'Ada' is taken" in out
    assert "12 students raced for 5 seats: 5 won, 7 found it full" in out
    assert "the chess roster, read by its query: 5 students" in out
    demo.main(tmp_path / "demo")  # runs again from an empty log
    assert "high-water mark: 14" in capsys.readouterr().out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]


def test_the_courses_example_keeps_its_rules_on_each_sql_backend(
    shared_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    courses.main(shared_store_url)
    out = capsys.readouterr().out
    assert out.count("refused: ") == 4
    assert "s2 left algebra, and s3 got the seat" in out
    assert "12 students raced for 5 seats: 5 won, 7 found it full" in out
    assert "the chess roster, read by its query: 5 students" in out


def test_the_demo_refuses_a_folder_it_did_not_make_and_deletes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    (tmp_path / "notes.txt.bak").write_text("mine too")
    assert demo.cli([str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"error: {tmp_path} holds files the demo did not write (notes.txt, notes.txt.bak); "
        "name a new or empty folder\n"
    )
    assert demo.cli([str(notes)]) == 2
    assert "is a file, not a folder for the demo" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "notes.txt.bak"]
    assert notes.read_text() == "mine"


def test_the_demo_refuses_its_own_folder_once_something_else_is_in_it(tmp_path: Path) -> None:
    demo.prepare(tmp_path / "demo")
    (tmp_path / "demo" / "report.csv").write_text("x")
    with pytest.raises(demo.NotTheDemosFolder, match=r"\(report.csv\)"):
        demo.prepare(tmp_path / "demo")


def test_the_demo_answers_help_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        demo.cli(["--help"])
    assert exit_.value.code == 0
    assert "usage: python -m examples.demo [-h] [directory]" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []


def _readme_snippets() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("index", range(len(_readme_snippets())))
def test_a_readme_snippet_runs_twice_in_a_row(
    index: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    # As pasted into a file of its own: without this module's `from __future__` imports.
    code = compile(
        _readme_snippets()[index], f"README.md snippet {index}", "exec", dont_inherit=True
    )
    for _ in range(2):  # as a reader pastes it twice: nothing the first run left may break it
        exec(code, {})


def test_each_readme_section_stands_once() -> None:
    """A section pasted twice leaves a reader two sets of figures, one of them stale."""
    text = (ROOT / "README.md").read_text()
    headings = re.findall(r"^## .+$", text, flags=re.M)
    assert sorted(h for h in set(headings) if headings.count(h) > 1) == []
    blocks = text.split("\n\n")
    long_blocks = [b for b in blocks if b.count("\n") >= 8]
    assert sorted({b[:60] for b in long_blocks if long_blocks.count(b) > 1}) == []


def test_the_manual_gives_the_roles_sql_the_tests_run() -> None:
    """The grants a reader copies are those `tests/eventstore/test_privileges.py` runs."""
    text = (ROOT / "docs" / "reference" / "manual" / "event-store.md").read_text()
    blocks = re.findall(r"```sql\n(.*?)```", text, flags=re.S)
    roles = (ROOT / "examples" / "postgres_roles.sql").read_text()
    assert roles in blocks
