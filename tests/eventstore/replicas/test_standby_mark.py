"""The global log's rule on a hot standby (`eventstore/postgres/replicas.py`): a reader of
the standby never passes a position an append still running on the primary may fill,
and is not held back by transactions on the primary that append nothing."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.postgres import high_water, replicas
from eventcraft.eventstore.sql import schema

from ...processes import PROCESSES
from ...replica_server import caught_up, pause_replay, resume_replay
from ...waiting import until
from .. import workers
from ..held_appends import append_uncommitted
from .conftest import Pair

# slow: A primary and a hot standby of their own, started for the module.
pytestmark = pytest.mark.slow

Conn = psycopg.Connection[Any]


@contextmanager
def _connected(url: str, *, autocommit: bool = True) -> Iterator[Conn]:
    with psycopg.connect(url, autocommit=autocommit) as conn:
        yield conn


def _asking(primary: Conn) -> Any:
    return lambda after: replicas.primary_mark(primary, after)


def _positions(conn: Conn, after: int, upto: int) -> list[tuple[int, str]]:
    rows = conn.execute(
        f"SELECT position, id::text FROM {schema.EVENTS}"
        " WHERE position > %s AND position <= %s ORDER BY position",
        (after, upto),
    ).fetchall()
    return [(int(p), str(i)) for p, i in rows]


def test_a_standby_reader_stops_at_a_position_an_append_on_the_primary_still_holds(
    pair: Pair,
) -> None:
    with (
        EventStore.open(pair.primary_url) as store,
        _connected(pair.primary_url, autocommit=False) as held,
    ):
        first = store.append("early-1", [NewEvent("Early", {})]).positions[0]
        gap = append_uncommitted(held, "held-1")[0]
        later = store.append("later-1", [NewEvent("Later", {})]).positions[0]
        assert first < gap < later
        caught_up(pair.primary, pair.standby)
        with _connected(pair.standby_url) as standby, _connected(pair.primary_url) as primary:
            shown = [p for p, _ in _positions(standby, 0, later)]
            assert shown == [first, later]  # the standby shows `later` beyond the gap
            assert replicas.standby_head(standby, 0, lambda after: None) == first
            assert replicas.standby_head(standby, 0, _asking(primary)) == first
            # The primary's own rule, run on the standby, would pass the gap: the standby
            # shows neither the append lock nor the primary's running xids (xip).
            assert high_water.safe_head(standby, 0) == later
            held.commit()
            caught_up(pair.primary, pair.standby)
            assert replicas.standby_head(standby, 0, lambda after: None) == later


def test_a_stranger_on_the_primary_holds_a_standby_reader_only_until_the_primary_is_asked(
    pair: Pair,
) -> None:
    with EventStore.open(pair.primary_url) as store:
        first = store.append("early-1", [NewEvent("Early", {})]).positions[0]
        with _connected(pair.primary_url, autocommit=False) as stranger:
            stranger.execute("SELECT pg_current_xact_id()")  # an xid, no append lock
            gap = append_uncommitted(stranger, "refused-1")  # positions drawn...
            stranger.rollback()  # ...and given up: a gap nothing will fill
            stranger.execute("SELECT pg_current_xact_id()")  # a stranger, open from here
            later = store.append("later-1", [NewEvent("Later", {})]).positions[0]
            assert first < gap[0] < later
            caught_up(pair.primary, pair.standby)
            with _connected(pair.standby_url) as standby, _connected(pair.primary_url) as primary:
                # The standby alone cannot tell the stranger from a writer: it waits...
                assert replicas.standby_head(standby, first, lambda after: None) == first
                # ...the primary can, once the standby has replayed what it judged (the
                # primary's WAL may have moved on since: a checkpoint, autovacuum).
                until(
                    lambda: replicas.standby_head(standby, first, _asking(primary)) == later,
                    "the standby reader to pass the stranger's gap",
                )
                pause_replay(pair.standby)
                try:
                    newest = store.append("later-2", [NewEvent("Later", {})]).positions[0]
                    # Not replayed yet: the primary's mark is not the standby's to use.
                    assert replicas.standby_head(standby, later, _asking(primary)) == later
                finally:
                    resume_replay(pair.standby)
                until(
                    lambda: replicas.standby_head(standby, later, _asking(primary)) == newest,
                    "the standby reader to reach the newest append",
                )


def test_a_standby_reader_tailing_concurrent_writers_skips_nothing_through_a_paused_replay(
    pair: Pair,
) -> None:
    writers, appends = 4, 40
    with EventStore.open(pair.primary_url):
        pass  # the store's tables, made on the primary
    caught_up(pair.primary, pair.standby)
    seen: list[tuple[int, str]] = []
    with (
        ProcessPoolExecutor(writers, mp_context=PROCESSES) as pool,
        _connected(pair.standby_url) as standby,
        _connected(pair.primary_url) as primary,
    ):
        futures = [
            pool.submit(workers.slow_committer, pair.primary_url, w, appends, seed=w)
            for w in range(writers)
        ]
        last, passes, paused_at = 0, 0, None
        while not all(f.done() for f in futures):
            passes += 1
            if paused_at is None and last > 0:
                pause_replay(pair.standby)  # mid-run, with writers committing
                paused_at = passes
            elif paused_at is not None and passes == paused_at + 20:
                resume_replay(pair.standby)
            head = replicas.standby_head(standby, last, _asking(primary))
            seen += _positions(standby, last, head)
            last = max(last, head)
        resume_replay(pair.standby)
        assert paused_at is not None, "the reader saw nothing while the writers ran"
        committed = {i for f in futures for i in f.result()}
        # Writers done, replay resumed: the reader reaches the primary's final log.
        final = _positions(primary, 0, 2**62)
        deadline = time.monotonic() + 30
        while last < final[-1][0]:
            assert time.monotonic() < deadline, f"the standby reader stalled at {last}"
            head = replicas.standby_head(standby, last, _asking(primary))
            seen += _positions(standby, last, head)
            last = max(last, head)
    assert seen == final, "the standby reader skipped, repeated or reordered events"
    assert {i for _, i in seen} == committed


def test_a_writer_whose_xid_and_position_the_standby_never_saw_in_the_wal_still_holds_it(
    pair: Pair,
) -> None:
    """The delicate case of the argument: a writer that has taken the append lock, its
    xid and a position, and written no row yet (its position comes from the range the
    sequence logged ahead, so no WAL record need name its xid). A later append's commit,
    replayed, marks every lower xid not seen ending as running on the standby."""
    with EventStore.open(pair.primary_url) as store, _connected(pair.primary_url) as primary:
        first = store.append("early-1", [NewEvent("Early", {})]).positions[0]
        with _connected(pair.primary_url, autocommit=False) as writer:
            writer.execute(f"SELECT pg_advisory_xact_lock_shared({schema.LOG_LOCK_KEY})")
            writer.execute("SELECT pg_current_xact_id()")
            row = writer.execute(f"SELECT nextval('{schema.POSITION_SEQUENCE}')").fetchone()
            assert row is not None
            drawn = int(row[0])
            later = store.append("later-1", [NewEvent("Later", {})]).positions[0]
            assert first < drawn < later
            caught_up(pair.primary, pair.standby)
            with _connected(pair.standby_url) as standby:
                assert replicas.standby_head(standby, first, lambda after: None) == first
                assert replicas.standby_head(standby, first, _asking(primary)) == first
                writer.rollback()  # the position is given up: a gap nothing will fill
                caught_up(pair.primary, pair.standby)
                assert replicas.standby_head(standby, first, lambda after: None) == later
