"""What an import says of a file with nothing in it (it writes nothing, not even a new
store) and of a line that is not JSON (its line in the file, once)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore

from .conftest import HISTORY, Run, schema_exists


@pytest.mark.parametrize("content", [b"", b"\n  \n\n"], ids=["empty", "blank lines"])
@pytest.mark.parametrize("flags", [(), ("--no-check",)], ids=["checked", "unchecked"])
def test_an_empty_file_is_nothing_to_import_and_makes_no_store(
    run: Run, tmp_path: Path, pg_url: str, content: bytes, flags: tuple[str, ...]
) -> None:
    empty = tmp_path / "empty.ndjson"
    empty.write_bytes(content)
    target = tmp_path / "new" / "events.db"
    for url in (f"sqlite:///{target}", pg_url):
        outcome = run("--store", url, "import", str(empty), *flags)
        assert outcome.code == 0, outcome.err
        assert outcome.out == f"nothing to import: {empty} holds no events; no store was made\n"
    assert not (tmp_path / "new").exists()
    assert not schema_exists(pg_url.rpartition("schema=")[2])


def test_an_empty_file_writes_nothing_into_a_store_that_is_there(
    run: Run, tmp_path: Path, known_url: str
) -> None:
    empty = tmp_path / "empty.ndjson"
    empty.write_bytes(b"")
    outcome = run("--store", known_url, "import", str(empty), "--yes")
    assert outcome.code == 0, outcome.err
    assert outcome.out == f"nothing to import: {empty} holds no events\n"
    as_json = run("--store", known_url, "import", str(empty), "--yes", "--json")
    assert json.loads(as_json.out) == {"events": 0, "written": 0, "skipped": 0, "deletions": 0}
    with EventStore.open(known_url) as store:
        assert store.high_water_mark() == len(HISTORY)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (b"{\n", "line 4: not JSON: unexpected end of data at column 2;"),
        (b'{"stream_id": \n', "line 4: not JSON: unexpected end of data at column 15;"),
        (b'{"a": 1} x\n', "line 4: not JSON: unexpected content after document at column 10;"),
        (b"nope\n", "line 4: not JSON: invalid literal, expected 'null' at column 1;"),
    ],
)
def test_a_line_that_is_not_json_is_named_once_by_its_line_and_column(
    run: Run, tmp_path: Path, known_url: str, line: bytes, said: str
) -> None:
    exported = tmp_path / "events.ndjson"
    assert run("--store", known_url, "export", "--out", str(exported)).code == 0
    good = exported.read_bytes().splitlines(keepends=True)[:3]
    broken = tmp_path / "broken.ndjson"
    broken.write_bytes(b"".join([*good, line, *good]))
    outcome = run("--store", f"sqlite:///{tmp_path / 'copy.db'}", "import", str(broken))
    assert outcome.code == 2
    assert outcome.err.startswith(f"error: {said}"), outcome.err
    assert outcome.err.count("line") == 1, outcome.err
