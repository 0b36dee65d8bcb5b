"""One retention run at a time per store, whatever archive folder each is given: two runs
into different folders would each archive and remove, and the store's runs would name an
archive that does not hold everything below the mark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.projections.archive_files import ArchiveFiles

from eventcraft.operations import retention
from eventcraft.operations.errors import Problems

from ..processes import PROCESSES

ORDERS = [RetentionPolicy("order", max_count=1)]


@pytest.mark.slow
def test_a_run_into_another_folder_while_one_runs_on_the_store_is_refused(
    shared_store_url: str, tmp_path: Path
) -> None:
    from .retention_workers import apply_held_while_archiving

    url, first_folder, second_folder = shared_store_url, tmp_path / "a", tmp_path / "b"
    with EventStore.open(url) as store:
        for s in range(3):
            store.append(f"order-{s}", [NewEvent("Paid", {"cents": 1}) for _ in range(5)])
    writing, go_on = PROCESSES.Event(), PROCESSES.Event()
    first = PROCESSES.Process(
        target=apply_held_while_archiving, args=(url, str(first_folder), writing, go_on)
    )
    first.start()
    try:
        assert writing.wait(60), "the first run did not begin its segment"
        # The holder, as each backend can name it: its process, or its server session.
        holder = rf"process {first.pid}" if url.startswith("sqlite") else r"PostgreSQL backend \d+"
        with EventStore.open(url) as store:
            with pytest.raises(
                Problems, match=rf"another retention run holds .*\({holder}.*did nothing"
            ):
                retention.apply(store, ORDERS, [], str(second_folder))
            assert store.low_water_mark() == 0
    finally:
        go_on.set()
        first.join(60)
    assert first.exitcode == 0
    assert ArchiveFiles(second_folder).segments() == []  # the refused run wrote nothing
    with EventStore.open(url) as store:
        assert [(r.up_to, r.archive) for r in store.retention.runs()] == [(15, str(first_folder))]
        # The lock went with its run: the next one (into the first's folder) goes ahead.
        store.append("order-9", [NewEvent("Paid", {"cents": 1})])
        assert retention.apply(store, ORDERS, [], str(first_folder)).run.up_to == 16


@pytest.mark.slow
def test_a_run_whose_lock_session_ended_removes_nothing(pg_url: str, tmp_path: Path) -> None:
    """The session holding the store's lock ends mid-run (a restart, a cut connection):
    another run could take the lock then, so this one must not remove beside it."""
    from eventcraft.eventstore.postgres.retention import RUN_LOCK_TAG

    from .retention_workers import apply_held_while_archiving

    base, schema = pg_url.split("?schema=")
    with EventStore.open(pg_url) as store:
        for s in range(3):
            store.append(f"order-{s}", [NewEvent("Paid", {"cents": 1}) for _ in range(5)])
    writing, go_on = PROCESSES.Event(), PROCESSES.Event()
    run = PROCESSES.Process(
        target=apply_held_while_archiving, args=(pg_url, str(tmp_path / "a"), writing, go_on)
    )
    run.start()
    try:
        assert writing.wait(60), "the run did not begin its segment"
        with psycopg.connect(base, autocommit=True) as conn:
            # This test's own run's session: the one holding this schema's retention lock.
            ended = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                "AND classid = %s AND objid = %s::regclass::oid AND granted",
                (RUN_LOCK_TAG, f"{schema}.eventcraft_events"),
            ).fetchall()
        assert ended == [(True,)]
    finally:
        go_on.set()
        run.join(60)
    assert run.exitcode != 0  # the removal failed with its session
    with EventStore.open(pg_url) as store:
        assert store.low_water_mark() == 0
        assert store.retention.runs() == []
        assert len(list(store.read_all())) == 15


def test_a_runs_lock_is_given_back_before_its_session_ends(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run gives its lock back when it ends, not when the server has seen its session's
    backend exit (which comes later, and later still on a busy server): the next run of
    the same process, at once, must not be refused as busy."""
    held_at_close: list[int] = []
    close = psycopg.Connection.close

    def closing(conn: psycopg.Connection[Any]) -> None:
        row = probe.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s",
            (conn.info.backend_pid,),
        ).fetchone()
        held_at_close.append(row[0] if row else -1)
        close(conn)

    with (
        psycopg.connect(pg_url.split("?schema=")[0], autocommit=True) as probe,
        EventStore.open(pg_url) as store,
    ):
        with store.retention.exclusive():
            monkeypatch.setattr(psycopg.Connection, "close", closing)
        monkeypatch.undo()
        assert held_at_close == [0]  # the run's session no longer held it when it closed
        with store.retention.exclusive():  # and the next run takes it at once
            pass
