"""A store written by the previous release opens with this one and works on (issue 26).

The stores in `previous_release/` were written by that release's code
(`make_stores.py` says how): a SQLite file whose ids are text and whose indexes
and streams table have the earlier layout, and a pg_dump of a PostgreSQL store.
Opening one brings its layout up to date; its events stay as they were written.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from eventcraft.eventstore import (
    AppendCondition,
    AppendConditionFailed,
    DuplicateEventId,
    EventStore,
    NewEvent,
    Query,
    QueryItem,
)
from eventcraft.eventstore.sql import schema

from ..conftest import PG_URL, _need_postgres
from .previous_release.make_stores import APPENDS, SCHEMA, SNAPSHOT

PREVIOUS = Path(__file__).parent / "previous_release"


@pytest.fixture(params=["sqlite", "postgres"])
def previous_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The URL of a copy of the store the previous release wrote."""
    if request.param == "sqlite":
        shutil.copy(PREVIOUS / "store.db", tmp_path / "store.db")
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    yield from _previous_postgres_store()


@pytest.fixture
def previous_postgres_store() -> Iterator[str]:
    yield from _previous_postgres_store()


def _previous_postgres_store() -> Iterator[str]:
    _need_postgres()
    name = f"t_previous_{uuid.uuid4().hex[:8]}"
    dump = (PREVIOUS / "postgres.sql").read_text().replace(SCHEMA, name)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(dump.encode())
    yield f"{PG_URL}?schema={name}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


Written = tuple[uuid.UUID, str, int, int, str, dict[str, Any], dict[str, Any]]


def _written() -> list[Written]:
    """Every event the previous release appended: id, stream, version, position, type,
    data, metadata."""
    rows: list[Written] = []
    for stream_id, events in APPENDS:
        for version, (id, type, data, metadata) in enumerate(events, start=1):
            rows.append((uuid.UUID(id), stream_id, version, len(rows) + 1, type, data, metadata))
    return rows


def test_a_store_of_the_previous_release_reads_as_it_was_written(previous_store: str) -> None:
    with EventStore.open(previous_store) as store:
        read = [
            (e.id, e.stream_id, e.version, e.position, e.type, e.data, e.metadata)
            for e in store.read_all()
        ]
        assert read == _written()
        for id, stream_id, version, *_ in _written():
            found = store.read_event(id)
            assert found is not None and (found.stream_id, found.version) == (stream_id, version)
        assert [e.version for e in store.read_stream("order-1")] == [1, 2]
        assert [e.position for e in store.read_all(categories=["order"])] == [1, 2, 3]
        assert [s.stream_id for s in store.list_streams(category="order")] == [
            "order-1",
            "order-2",
        ]
        stream_id, version, type, data = SNAPSHOT
        snapshot = store.load_snapshot(stream_id)
        assert snapshot is not None
        assert (snapshot.version, snapshot.type, snapshot.data) == (version, type, data)


def test_a_retry_of_an_append_the_previous_release_stored_writes_nothing(
    previous_store: str,
) -> None:
    stream_id, events = APPENDS[0]
    with EventStore.open(previous_store) as store:
        again = [NewEvent(t, d, m, id=uuid.UUID(id)) for id, t, d, m in events]
        result = store.append(stream_id, again, 0)
        assert (result.version, result.positions) == (2, (1, 2))
        assert store.high_water_mark() == 4


def test_an_id_the_previous_release_stored_is_refused_in_another_stream(
    previous_store: str,
) -> None:
    id = uuid.UUID(APPENDS[1][1][0][0])
    with EventStore.open(previous_store) as store:
        with pytest.raises(DuplicateEventId):
            store.append("order-3", [NewEvent("Placed", {}, id=id)])
        with pytest.raises(DuplicateEventId):
            store.append("order-3", [NewEvent("Placed", {}), NewEvent("Paid", {}, id=id)])
        assert store.high_water_mark() == 4
        assert store.stream_version("order-3") == 0


def test_appends_go_on_after_the_upgrade(previous_store: str) -> None:
    with EventStore.open(previous_store) as store:
        paid = NewEvent("Shipped", {"by": "post"})
        assert store.append("order-1", [paid], 2).positions == (5,)
        assert store.append("order-9", [NewEvent("Placed", {})], 0).positions == (6,)
        retried = store.append("order-1", [paid], 2)
        assert retried.positions == (5,)
        assert [e.position for e in store.read_all(after=3, categories=["order"])] == [5, 6]
        shipped = store.read_event(paid.id)
        assert shipped is not None and shipped.data == {"by": "post"}
    with EventStore.open(previous_store) as reopened:  # a second opening changes nothing
        read = list(reopened.read_all())  # one page: the older ids and the new
        assert [e.position for e in read] == [1, 2, 3, 4, 5, 6]
        assert [e.id for e in read[:4]] == [id for id, *_ in _written()]
        assert read[4].id == paid.id


def test_the_sqlite_upgrade_keeps_the_rows_and_takes_the_new_layout(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    shutil.copy(PREVIOUS / "store.db", path)
    with EventStore.open(f"sqlite:///{path}") as store:
        store.append("order-1", [NewEvent("Shipped", {})], 2)
    conn = sqlite3.connect(path)
    try:
        forms = conn.execute(f"SELECT typeof(id) FROM {schema.EVENTS} ORDER BY position")
        assert [form for (form,) in forms] == ["text"] * 4 + ["blob"]
        for index in (f"{schema.EVENTS}_category_position", f"{schema.EVENTS}_type_position"):
            columns = conn.execute("SELECT name FROM pragma_index_info(?)", (index,))
            assert len(columns.fetchall()) == 1, index
        (streams,) = conn.execute(
            "SELECT sql FROM sqlite_master WHERE name = ?", (schema.STREAMS,)
        ).fetchone()
        assert "WITHOUT ROWID" in streams
        assert conn.execute(f"SELECT count(*) FROM {schema.STREAMS}").fetchone() == (3,)
    finally:
        conn.close()


def test_the_postgres_upgrade_keys_the_category_and_type_indexes(
    previous_postgres_store: str,
) -> None:
    previous_store = previous_postgres_store
    with EventStore.open(previous_store) as store:
        placed = [position for _, _, _, position, type, *_ in _written() if type == "Placed"]
        assert [e.position for e in store.read_all(types=["Placed"])] == placed
        by_query = store.read_query(Query([QueryItem(types=["Placed"])])).events
        assert [e.position for e in by_query] == placed
    definitions = _postgres_indexes(previous_store, schema.EVENTS)
    assert f"{schema.EVENTS}_category_position" not in definitions
    assert f"{schema.EVENTS}_type_position" not in definitions
    for column in ("category", "type"):
        assert (
            f'hashtextextended({column}, (0)::bigint), "position"'
            in (definitions[f"{schema.EVENTS}_{column}_key"])
        )


_PLANNED_EACH_TIME = {
    # As the release before this one's functions were: sql, planned again in every
    # transaction that called them from plpgsql.
    "eventcraft_stream_version(text)": """
CREATE OR REPLACE FUNCTION eventcraft_stream_version(p_stream text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT coalesce(max(version), 0) FROM eventcraft_events WHERE stream_id = p_stream
$$""",
    "eventcraft_first_match(jsonb, bigint)": """
CREATE OR REPLACE FUNCTION eventcraft_first_match(p_query jsonb, p_after bigint)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT min(p) FROM eventcraft_query_positions(
        p_query, coalesce(p_after, 0), 9223372036854775807, 1) AS p
$$""",
}


def _languages(conn: psycopg.Connection[Any]) -> dict[str, str]:
    return {
        name: conn.execute(
            "SELECT l.lanname FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang "
            "WHERE p.oid = to_regprocedure(%s)",
            (name,),
        ).fetchone()[0]  # type: ignore[index]
        for name in _PLANNED_EACH_TIME
    }


def test_a_store_whose_functions_were_planned_each_time_gets_kept_plans(pg_url: str) -> None:
    name = pg_url.split("schema=", 1)[1]
    with EventStore.open(pg_url) as store:
        store.append("order-1", [NewEvent("Placed", {}, tags=["order:1"])])
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={name}") as conn:
        for statement in _PLANNED_EACH_TIME.values():
            conn.execute(statement)
        assert set(_languages(conn).values()) == {"sql"}
    with EventStore.open(pg_url) as store:
        query = Query([QueryItem(tags=["order:1"])])
        with pytest.raises(AppendConditionFailed):
            store.append(
                "order-2", [NewEvent("Placed", {})], condition=AppendCondition(query, after=0)
            )
        assert store.append("order-1", [NewEvent("Paid", {})]).version == 2
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={name}") as conn:
        assert set(_languages(conn).values()) == {"plpgsql"}


# The query function as the release before this one made it: each item taken apart
# in statements of its own.
_QUERY_ITEM_BY_ITEM = """
CREATE OR REPLACE FUNCTION eventcraft_query_positions(
    p_query jsonb, p_after bigint, p_until bigint, p_limit bigint
) RETURNS SETOF bigint LANGUAGE plpgsql STABLE ROWS 10 AS $$
DECLARE
    item jsonb;
    item_types text[];
    item_tags text[];
    one_type text;
BEGIN
    IF jsonb_array_length(p_query) = 0 THEN
        RETURN QUERY SELECT e.position FROM eventcraft_events e
            WHERE e.position > p_after AND e.position <= p_until
            ORDER BY e.position LIMIT p_limit;
        RETURN;
    END IF;
    FOR item IN SELECT value FROM jsonb_array_elements(p_query) LOOP
        item_types := ARRAY(SELECT jsonb_array_elements_text(item->0));
        item_tags := ARRAY(SELECT jsonb_array_elements_text(item->1));
        IF cardinality(item_tags) > 0 THEN
            RETURN QUERY SELECT t.position FROM eventcraft_tags t
                WHERE t.tag = item_tags[1] AND t.position > p_after AND t.position <= p_until
                    AND (cardinality(item_types) = 0 OR t.type = ANY(item_types))
                    AND (cardinality(item_tags) = 1 OR EXISTS (
                        SELECT FROM eventcraft_events e
                        WHERE e.position = t.position AND e.tags @> item_tags))
                ORDER BY t.position LIMIT p_limit;
        ELSE
            FOREACH one_type IN ARRAY item_types LOOP
                RETURN QUERY SELECT e.position FROM eventcraft_events e
                    WHERE hashtextextended(e.type, 0) = hashtextextended(one_type, 0)
                        AND e.type = one_type
                        AND e.position > p_after AND e.position <= p_until
                    ORDER BY e.position LIMIT p_limit;
            END LOOP;
        END IF;
    END LOOP;
END
$$"""


def test_a_store_whose_query_function_took_items_apart_gets_the_one_statement(
    pg_url: str,
) -> None:
    name = pg_url.split("schema=", 1)[1]
    with EventStore.open(pg_url) as store:
        store.append("course-1", [NewEvent("Opened", {}, tags=["course:1"])])
        store.append("enrol-1", [NewEvent("Enrolled", {}, tags=["course:1", "student:7"])])
        store.append("enrol-2", [NewEvent("Enrolled", {}, tags=["course:2", "student:7"])])
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={name}") as conn:
        conn.execute(_QUERY_ITEM_BY_ITEM)
    with EventStore.open(pg_url) as store:
        both = QueryItem(types=["Enrolled"], tags=["course:1", "student:7"])
        query = Query([both, QueryItem(types=["Opened"])])
        assert [e.stream_id for e in store.read_query(query).events] == ["course-1", "enrol-1"]
        with pytest.raises(AppendConditionFailed) as refused:
            store.append(
                "enrol-3",
                [NewEvent("Enrolled", {}, tags=["course:2", "student:8"])],
                condition=AppendCondition(Query([QueryItem(tags=["course:2"])]), after=2),
            )
        assert refused.value.position == 3
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={name}") as conn:
        body = conn.execute(
            "SELECT prosrc FROM pg_proc WHERE oid = to_regprocedure("
            "'eventcraft_query_positions(jsonb, bigint, bigint, bigint)')"
        ).fetchone()
    assert body is not None and "CROSS JOIN LATERAL" in body[0]


def test_the_previous_release_s_index_of_streams_by_category_is_dropped(
    previous_store: str,
) -> None:
    # Listing a category walks the primary key's range of its streams instead.
    with EventStore.open(previous_store) as store:
        assert [s.stream_id for s in store.list_streams(category="order")] == [
            "order-1",
            "order-2",
        ]
    assert schema.STREAMS_CATEGORY_INDEX not in _index_names(previous_store)


def test_a_store_of_the_last_layout_loses_its_index_of_streams_by_category(
    shared_store_url: str,
) -> None:
    # As the release before this one made it, on streams already without a rowid.
    with EventStore.open(shared_store_url) as store:
        store.append("order-1", [NewEvent("Placed", {})])
    index = (
        f"CREATE INDEX {schema.STREAMS_CATEGORY_INDEX} ON {schema.STREAMS} (category, stream_id)"
    )
    _execute(shared_store_url, index)
    assert schema.STREAMS_CATEGORY_INDEX in _index_names(shared_store_url)
    with EventStore.open(shared_store_url) as store:
        store.append("order-2", [NewEvent("Placed", {})])
        assert [s.stream_id for s in store.list_streams(category="order")] == [
            "order-1",
            "order-2",
        ]
    assert schema.STREAMS_CATEGORY_INDEX not in _index_names(shared_store_url)


def _execute(url: str, statement: str) -> None:
    if url.startswith("sqlite"):
        with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
            conn.execute(statement)
        return
    name = url.split("schema=", 1)[1]
    with psycopg.connect(PG_URL, autocommit=True, options=f"-c search_path={name}") as conn:
        conn.execute(statement.encode())


def _index_names(url: str) -> set[str]:
    """The names of the indexes of the streams table of the store at `url`."""
    if not url.startswith("sqlite"):
        return set(_postgres_indexes(url, schema.STREAMS))
    conn = sqlite3.connect(url.removeprefix("sqlite:///"))
    try:
        rows = conn.execute("SELECT name FROM pragma_index_list(?)", (schema.STREAMS,))
        return {name for (name,) in rows}
    finally:
        conn.close()


def _postgres_indexes(url: str, table: str) -> dict[str, str]:
    """The indexes of `table` in the PostgreSQL store at `url`: their definitions by name."""
    name = url.split("schema=", 1)[1]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        found = conn.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
            (name, table),
        ).fetchall()
    return dict(found)
