"""PostgreSQL's indexes stay packed as the log grows: the category and type indexes
(keyed_indexes.py), and the stream index's 4-byte versions (schema.py).

Keyed by their names, the entries of a frequent type arrived at the end of its
range, on pages shared with the next type's entries of another length, and
each of those pages was split in two halves: the type index took 72 bytes an
event where its entries need 36.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent

from ..conftest import PG_URL, _need_postgres

EVENTS = 40_000


@pytest.fixture
def schema_name() -> Iterator[str]:
    _need_postgres()
    name = f"t_index_size_{uuid.uuid4().hex[:8]}"
    yield name
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.mark.slow
def test_the_type_and_category_indexes_fill_their_pages(schema_name: str) -> None:
    with EventStore.open(f"{PG_URL}?schema={schema_name}") as store:
        for n in range(EVENTS // 100):
            # Types and categories of different lengths, as in any real log.
            store.append(
                f"{('order', 'customer', 'invoiceLine')[n % 3]}-{n}",
                [NewEvent("Opened", {})] + [NewEvent("MoneyDeposited", {}) for _ in range(99)],
            )
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for column in ("category", "type"):
            (size,) = conn.execute(
                "SELECT pg_relation_size(%s::regclass)",
                (f"{schema_name}.eventcraft_events_{column}_key",),
            ).fetchone() or (0,)
            # An entry is 24 bytes and its pointer 4: at the default 90% fill, 31 an event.
            assert size / EVENTS < 40, (column, size / EVENTS)


@pytest.mark.slow
def test_the_stream_index_takes_four_byte_versions(schema_name: str) -> None:
    """A stream's events are found by (stream_id, version): with 8-byte versions, aligned
    to 8 after the name, an entry took 32 bytes; with 4, 24. Streams arrive in no order
    of their ids, so pages fill as random inserts leave them."""
    with EventStore.open(f"{PG_URL}?schema={schema_name}") as store:
        for _ in range(EVENTS // 100):
            events = [NewEvent("Opened", {}) for _ in range(100)]
            store.append(f"account-{uuid.uuid4().hex[:8]}", events)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        (size,) = conn.execute(
            "SELECT pg_relation_size(%s::regclass)",
            (f"{schema_name}.eventcraft_events_stream_version",),
        ).fetchone() or (0,)
    # Measured: 55 bytes an event with 4-byte versions, 83 with 8.
    assert size / EVENTS < 65, size / EVENTS
