"""An import creates its store only once the file has passed its check: a missing,
unreadable or refused file leaves no store (and no folders) behind, and a memory://
store, which would keep nothing, is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import Run, schema_exists


def _bad_inputs(tmp_path: Path) -> dict[str, Path]:
    junk = tmp_path / "junk.ndjson"
    junk.write_bytes(b"this is not json\n")
    refused = tmp_path / "refused.ndjson"
    refused.write_bytes(b'{"stream_id": "order-1"}\n')
    return {"missing": tmp_path / "nosuch.ndjson", "junk": junk, "refused": refused}


@pytest.mark.parametrize(
    ("which", "flags"),
    # Without the check a line at fault is found as the import writes: only a file that
    # cannot be read is found before.
    [("missing", ()), ("junk", ()), ("refused", ()), ("missing", ("--no-check",))],
)
def test_a_failed_import_leaves_no_sqlite_store_nor_folders(
    run: Run, tmp_path: Path, which: str, flags: tuple[str, ...]
) -> None:
    target = tmp_path / "new" / "folder" / "events.db"
    outcome = run(
        "--store", f"sqlite:///{target}", "import", str(_bad_inputs(tmp_path)[which]), *flags
    )
    assert outcome.code == 2, outcome.err
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("which", ["missing", "junk"])
def test_a_failed_import_leaves_no_postgres_schema(
    run: Run, pg_url: str, tmp_path: Path, which: str
) -> None:
    outcome = run("--store", pg_url, "import", str(_bad_inputs(tmp_path)[which]))
    assert outcome.code == 2, outcome.err
    assert not schema_exists(pg_url.rpartition("schema=")[2])


def test_a_checked_import_creates_the_store_and_its_folders(
    run: Run, known_url: str, tmp_path: Path
) -> None:
    exported = tmp_path / "events.ndjson"
    assert run("--store", known_url, "export", "--out", str(exported)).code == 0
    target = tmp_path / "new" / "events.db"
    outcome = run("--store", f"sqlite:///{target}", "import", str(exported))
    assert outcome.code == 0, outcome.err
    assert "imported 6 events: 6 written" in outcome.out


def test_an_import_into_memory_is_refused(run: Run, tmp_path: Path) -> None:
    exported = tmp_path / "events.ndjson"
    exported.write_bytes(b"")
    outcome = run("--store", "memory://", "import", str(exported))
    assert outcome.code == 2
    assert outcome.err.startswith("error: a memory:// store ends with the command")
