"""What a reader that holds the log in columns of its own takes from the store's face:
events made from columns (Arrow batches of the archive and of Spark), and the log as a
subquery of a PostgreSQL store's tables (Spark's JDBC source)."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import psycopg
import pytest
from eventcraft.eventstore import (
    EventStore,
    NewEvent,
    PostgresTarget,
    events_from_columns,
    postgres_log_subquery,
)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(moment: datetime) -> int:
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _appended(store: EventStore) -> None:
    store.append("order-1", [NewEvent("Placed", {"n": 1}, {"by": "a"}, tags=("c:1", "b:2"))])
    store.append("order-2", [NewEvent("Placed", {"n": 2}), NewEvent("Paid", {"é": [1.5]})])


def test_events_from_columns_are_the_events_the_store_reads(store: EventStore) -> None:
    _appended(store)
    read = list(store.read_all())
    columns = {
        "id": [str(e.id) for e in read],
        "stream_id": [e.stream_id for e in read],
        "version": [e.version for e in read],
        "position": [e.position for e in read],
        "type": [e.type for e in read],
        "data": [orjson.dumps(e.data).decode() for e in read],
        "metadata": [orjson.dumps(e.metadata).decode() for e in read],
        "recorded_at": [_micros(e.recorded_at) for e in read],
        "tags": [list(e.tags) or None for e in read],
    }
    asked: list[str] = []

    def column(name: str) -> list[object]:
        asked.append(name)
        return columns[name]  # type: ignore[return-value]

    assert events_from_columns(column) == read
    assert sorted(asked) == sorted(columns)  # each once


def test_an_id_not_as_the_log_writes_it_is_refused() -> None:
    row: dict[str, list[object]] = {
        "id": ["x"],
        "stream_id": ["s-1"],
        "version": [1],
        "position": [1],
        "type": ["T"],
        "data": ["{}"],
        "metadata": ["{}"],
        "recorded_at": [0],
        "tags": [None],
    }
    with pytest.raises(ValueError, match="badly formed event id 'x'"):
        events_from_columns(row.__getitem__)


@pytest.mark.postgres
def test_the_log_subquery_reads_the_events_read_all_reads(pg_url: str) -> None:
    with EventStore.open(pg_url) as store:
        _appended(store)
        read = list(store.read_all(after=1))
        target = PostgresTarget.from_url(pg_url)
        with psycopg.connect(target.conninfo) as connection:
            if target.schema is not None:
                connection.execute(f'SET search_path TO "{target.schema}"')
            rows = connection.execute(
                "SELECT position, stream_id, version, type, id, tags, category "
                f"FROM {postgres_log_subquery(1, store.high_water_mark())}"
            ).fetchall()
    assert rows == [
        (e.position, e.stream_id, e.version, e.type, str(e.id), list(e.tags), e.category)
        for e in read
    ]
