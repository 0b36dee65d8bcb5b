"""The log as one SQL subquery, for a reader that reads a PostgreSQL store's tables
itself rather than through a store: Spark's JDBC source, which reads rows straight into
the JVM, one position range a task.

The subquery is the store's to write, as the tables are: it reads what `read_all`
reads of the events table, each column in a type a JDBC reader takes as it is.
"""

from __future__ import annotations

from ..sql.schema import EVENTS


def postgres_log_subquery(after: int, upto: int) -> str:
    """`(SELECT ...) AS log`: the events after position `after` up to `upto` (both whole
    numbers, written into the text), as columns `position`, `stream_id`, `version`
    (bigint), `type`, `id` (text), `data` and `metadata` (JSON text), `recorded_at`,
    `tags` (an array, empty for none) and `category`.

    It reads the table as stored, with no snapshot rule of its own: a reader bounds
    `upto` by a high-water mark it read first (`EventStore.high_water_mark`), so that no
    append still running can fill a position below it later.

    Example::

        # needs: postgres
        import psycopg

        from eventcraft.eventstore import EventStore, NewEvent, PostgresTarget
        from eventcraft.eventstore import postgres_log_subquery as log_subquery

        url = "postgresql://postgres@localhost:5432/eventcraft"
        with EventStore.open(url) as store:
            store.append("order-1", [NewEvent("OrderPlaced", {"cents": 1250})])
            upto = store.high_water_mark()
        target = PostgresTarget.from_url(url)
        with psycopg.connect(target.conninfo, options=target.options()) as conn:
            log = log_subquery(0, upto)  # what Spark's JDBC source is given as its dbtable
            rows = conn.execute(f"SELECT stream_id, type FROM {log}").fetchall()
        assert rows == [("order-1", "OrderPlaced")]
    """
    after, upto = int(after), int(upto)
    return (
        "(SELECT position, stream_id, version::bigint AS version, type, id::text AS id, "
        "data::text AS data, metadata::text AS metadata, recorded_at, "
        "coalesce(tags, '{}') AS tags, category "
        f"FROM {EVENTS} WHERE position > {after} AND position <= {upto}) AS log"
    )
