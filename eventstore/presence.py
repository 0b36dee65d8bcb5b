"""Whether a database holds an event store, looked at without making one.

The backends create their tables on opening, wherever they are pointed; a shell that
only reads asks these first, so that a mistyped path, database or schema is an error
and not a new, empty store.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing

from .arguments import opening
from .errors import StoreUnavailable
from .postgres.connections import ConnectionPool, PostgresTarget
from .sql.schema import EVENTS


def postgres_holds_store(url: str, target: PostgresTarget) -> bool:
    """Whether the schema `target` names (the search path's, if none) holds an event
    store, or is one the role may not use: an open then names the USAGE it lacks.
    `StoreUnavailable` naming `url` (its password masked) if nothing answers.

    Example::

        # needs: postgres
        from eventcraft.eventstore import EventStore, PostgresTarget, postgres_holds_store

        url = "postgresql://postgres@localhost:5432/eventcraft"
        target = PostgresTarget.from_url(url)
        assert not postgres_holds_store(url, target)  # a new database; looking makes no store
        EventStore.open(url).close()  # opening does
        assert postgres_holds_store(url, target)
    """
    table = EVENTS if target.schema is None else f'"{target.schema}".{EVENTS}'
    with opening(url):  # StoreUnavailable naming the URL, as EventStore.open
        conn = ConnectionPool(target).connect()
    with conn:
        # A schema the role may not use is not looked in (that is refused): the open names
        # the USAGE the role lacks.
        row = conn.execute(
            "SELECT CASE WHEN EXISTS (SELECT FROM pg_namespace WHERE nspname = %s "
            "AND NOT has_schema_privilege(oid, 'USAGE')) THEN true "
            "ELSE to_regclass(%s) IS NOT NULL END",
            (target.schema, table),
        ).fetchone()
    return bool(row and row[0])


def sqlite_file_holds_store(path: str) -> bool:
    """Whether the existing file `path` is a SQLite database holding an event store;
    `StoreUnavailable` if it cannot be opened (a folder, no permission).

    Example::

        from eventcraft.eventstore import EventStore, sqlite_file_holds_store

        EventStore.open("sqlite:///shop.db").close()
        with open("notes.txt", "w") as notes:
            notes.write("not a database")
        assert sqlite_file_holds_store("shop.db")
        assert not sqlite_file_holds_store("notes.txt")  # looked at read-only, left as it was
    """
    # Read-only: a look must not turn another program's file (or an empty one) into a
    # database, nor leave a journal beside it.
    try:
        with closing(sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True)) as look:
            found = look.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (EVENTS,)
            ).fetchone()
    except sqlite3.OperationalError as error:  # cannot be opened: a folder, no permission
        raise StoreUnavailable(f"cannot open the event store at {path!r}: {error}") from None
    except sqlite3.DatabaseError:  # not a SQLite file at all
        found = None
    return found is not None


def _uri_path(path: str) -> str:
    """`path` as the path of a `file:` URI: `?` and `#` would end it, `%` escape."""
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")
