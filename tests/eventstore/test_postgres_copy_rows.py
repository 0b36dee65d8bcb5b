"""read_all_encoded splits PostgreSQL's COPY rows itself: what it makes of a row must be
what the server copied, whatever the fields hold."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from eventcraft.eventstore.postgres.statements import copied_record
from hypothesis import given, settings
from hypothesis import strategies as st

from ..conftest import PG_URL, _need_postgres

# Any text PostgreSQL can hold: no NUL, no lone surrogates.
texts = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))


@pytest.fixture(scope="module")
def conn() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    _need_postgres()
    with psycopg.connect(PG_URL, autocommit=True) as connection:
        yield connection


@settings(max_examples=200, deadline=None)
@given(stream_id=texts, type=texts, data=texts, metadata=texts, tags=st.lists(texts, max_size=3))
def test_a_copied_row_splits_into_the_fields_the_server_copied(
    conn: psycopg.Connection[tuple[object, ...]],
    stream_id: str,
    type: str,
    data: str,
    metadata: str,
    tags: list[str],
) -> None:
    # The tags as read_all_encoded_query copies them: NULL (no tags) as an empty field.
    query = (
        "COPY (SELECT 12::int8, 'id-text', %s::text, 3::int8, %s::text, %s::text, %s::text, "
        "'2026-11-23T21:52:16.625876+00:00', "
        "coalesce(array_to_json(nullif(%s::text[], '{}'))::text, '')) TO STDOUT"
    )
    with conn.cursor().copy(query, (stream_id, type, data, metadata, tags)) as copy:
        rows = [copied_record(row) for row in copy]
    moment = "2026-11-23T21:52:16.625876+00:00"
    assert [tuple(r) for r in rows] == [
        (12, "id-text", stream_id, 3, type, data, metadata, moment, tuple(tags))
    ]
