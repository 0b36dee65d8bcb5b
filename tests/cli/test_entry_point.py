"""What the `eventcraft` entry point prints around a command: an error is one line (the
library's log records are not printed beside it unless --debug), a group named alone
shows its help, and counts read as English."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, NewEvent

from .apps import fill_shop
from .conftest import Run

ROOT = Path(__file__).parents[2]


def _eventcraft(*arguments: str) -> subprocess.CompletedProcess[str]:
    """In a process of its own: pytest's own log capture would hide what Python prints."""
    return subprocess.run(
        [sys.executable, "-m", "eventcraft", *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,  # the App's module, tests.cli.apps, is imported from here
    )


@pytest.mark.slow
def test_a_failing_projection_is_one_error_line_and_its_log_record_only_with_debug(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    with EventStore.open(url) as store:
        fill_shop(store)
    done = _eventcraft("--store", url, "--app", "tests.cli.apps:shop", "projections", "catch-up")
    assert done.returncode == 1
    assert done.stderr == (
        "error: projection 'order-notes' stopped at position 7: ValueError: a negative amount: -5\n"
    )


@pytest.mark.parametrize("group", [(), ("projections",), ("spark",), ("retention",)])
def test_a_group_named_alone_shows_its_help(run: Run, group: tuple[str, ...]) -> None:
    bare = run(*group)
    asked = run(*group, "-h")
    assert bare.code == 2  # click's own for a group given no command
    assert bare.err == asked.out
    assert "Commands:" in bare.err and "error:" not in bare.err


def test_a_tombstone_of_a_stream_never_written_says_so(run: Run, known_url: str) -> None:
    done = run("--store", known_url, "delete-stream", "nosuch-2", "--tombstone", "--yes")
    assert done.code == 0, done.err
    assert (
        done.out.strip() == "tombstoned 'nosuch-2', which had no events: no append is taken again"
    )
    assert "retention" not in done.out


def test_one_of_a_thing_is_not_plural(run: Run, sqlite_url: str) -> None:
    with EventStore.open(sqlite_url) as store:
        store.append("order-1", [NewEvent("OrderPlaced", {})])
        store.save_snapshot("order-1", version=1, type="Order", data={"placed": True})
    done = run("--store", sqlite_url, "verify")
    assert done.code == 0, done.err
    assert done.out.startswith("ok: 1 event in 1 stream up to position 1, 1 snapshot,")
