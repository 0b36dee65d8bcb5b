"""Where a PostgreSQL store lives: its URL read into a `PostgresTarget`.

The URL is a libpq URI with the store's own parameters besides (`schema`,
`pool_size`, `pool_timeout`, `pooler`, `direct`), which are taken out and checked
here: libpq would refuse them. What libpq itself would refuse is refused here too,
as the input error it is, before any connection is tried.

A connection to the store sees it as the store does only with its settings: UTC, READ
COMMITTED, the schema first in search_path. Straight to PostgreSQL they go as libpq's
`options` startup parameter (`options()`), which PgBouncer refuses. Behind a pooler
(`?pooler=`), a session pooler gets them as SETs once a connection opens
(`session_settings()`), and a transaction pooler, whose sessions are not the client's,
gets them in every transaction the store runs (`transaction_begin()`,
`pipeline_settings()`), but for the time zone, which PgBouncer keeps for each client.
What needs a session of its own (LISTEN, retention's lock) takes the connection the URL's
`direct=` names (`direct_target()`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..arguments import redacted
from ..errors import UnsupportedStoreURL

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

POOL_SIZE = 10
"""Default for the most connections a store's pool opens at once (`?pool_size=` in the URL).

Ten serve dozens of threads: appends waiting together share one connection
(group commit), and readers hold one only while a page is read. The
listener that wakes waiting readers keeps one more of its own."""

POOL_TIMEOUT = 30.0
"""Default for the longest a caller waits for a pooled connection, in seconds
(`?pool_timeout=` in the URL), before `PoolExhausted` is raised."""

_MOST_POOL_SIZE = 1000

PARTITION_LEAST = 10
PARTITION_MOST = 1 << 40
"""The fewest and most positions a partition of a partitioned store holds
(`?partition_events=`, `partitions.py`)."""

POOLERS = ("session", "transaction")
"""What `?pooler=` takes: how the pooler between the store and PostgreSQL lends server
connections, as PgBouncer's `pool_mode` says it."""

_SETTINGS = (("timezone", "UTC"), ("default_transaction_isolation", "read committed"))
"""The settings every connection to the store has: UTC, so that recorded_at comes back
the same whatever the server's zone; READ COMMITTED whatever the server's default, so
that each statement of the append function sees what committed before it began."""


@dataclass(frozen=True)
class PostgresTarget:
    """Where a PostgreSQL store lives.

    Example::

        from eventcraft.eventstore import PostgresTarget

        url = "postgresql://app:s3cret@db.example:5432/shop?schema=orders&pool_size=20"
        target = PostgresTarget.from_url(url)  # read and checked; nothing is connected to
        assert (target.schema, target.pool_size, target.pool_timeout) == ("orders", 20, 30.0)
        assert target.conninfo.endswith("/shop?application_name=eventcraft")  # for libpq
        assert 'search_path="orders"' in target.options()  # quoted: Orders stays Orders

        behind = PostgresTarget.from_url(
            "postgresql://app@pgbouncer:6432/shop?schema=orders&pooler=transaction"
            "&direct=postgresql://app@db:5432/shop"
        )
        assert behind.pooler == "transaction"  # the settings go in each transaction
        direct = behind.direct_target()
        assert direct is not None and direct.pooler is None and direct.schema == "orders"
    """

    conninfo: str
    """A libpq URI without the store's own parameters."""
    schema: str | None
    """The schema holding the store's tables; None for the server's search_path."""
    pool_size: int = POOL_SIZE
    """The most connections the store's pool opens at once."""
    pool_timeout: float = POOL_TIMEOUT
    """The longest a caller waits for a connection, in seconds."""
    pooler: str | None = None
    """How the pooler the URL names lends PostgreSQL's connections (`POOLERS`); None for
    PostgreSQL itself."""
    direct: str | None = None
    """Behind a pooler, a libpq URI to PostgreSQL itself, for what needs a session of its
    own (LISTEN, retention's lock); None if the URL names none."""
    partition_events: int | None = None
    """Positions a partition of a new store's events table (`?partition_events=`,
    `partitions.py`); None for a table not partitioned. An existing store keeps its layout."""

    @classmethod
    def from_url(cls, url: str) -> PostgresTarget:
        """The target `url` names; `UnsupportedStoreURL` for a URL libpq or the store would
        refuse, before anything is connected to."""
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        schema = query.pop("schema", None)
        pool_size = _pool_setting(query, "pool_size", POOL_SIZE, int, _MOST_POOL_SIZE)
        pool_timeout = _pool_setting(query, "pool_timeout", POOL_TIMEOUT, float, 3600.0)
        pooler = query.pop("pooler", None)
        direct = query.pop("direct", None)
        partition_events = _partition_setting(query.pop("partition_events", None))
        # A read replica is the store's, not a connection's: `replicas.split_url` reads it,
        # and the target of a URL that names one is the primary.
        query.pop("replica", None)
        if "tenancy" in query:  # side_by_side.py reads it; here a URL is one database's
            raise UnsupportedStoreURL(
                "a tenant side by side (tenancy=shared) has no database or schema of its "
                "own: give what keeps tables of its own (a projection's read models, "
                "database=) a URL of another place"
            )
        query.setdefault("application_name", "eventcraft")  # tells operators whose connection it is
        if pooler is not None and pooler not in POOLERS:
            raise UnsupportedStoreURL(
                f"pooler must be one of {', '.join(POOLERS)} (PgBouncer's pool_mode), "
                f"not {pooler!r}"
            )
        if direct is not None:
            direct = _direct_conninfo(direct, pooler)
        if schema is not None and not _SCHEMA_NAME.fullmatch(schema):
            raise UnsupportedStoreURL(
                f"schema must be letters, digits and underscores (at most 63), not {schema!r}"
            )
        if not parts.hostname and not parts.path.strip("/"):
            raise UnsupportedStoreURL(
                "a PostgreSQL store URL is postgresql://user@host:port/database[?schema=name]"
            )
        netloc = _quoted_netloc(parts)
        conninfo = urlunsplit(("postgresql", netloc, parts.path, urlencode(query), ""))
        _check_conninfo(conninfo)
        return cls(
            conninfo, schema, int(pool_size), float(pool_timeout), pooler, direct, partition_events
        )

    def options(self) -> str:
        """The libpq `options` a connection to the store is opened with (`-c` settings):
        for a connection of one's own, straight to PostgreSQL, that must see the store as
        the store does. A pooler refuses them (`connect_arguments()` knows)."""
        # A space in a value is escaped, as libpq reads `options`.
        options = " ".join(f"-c {name}=" + value.replace(" ", "\\ ") for name, value in _SETTINGS)
        if self.schema is not None:
            # Quoted, as the schema is created: unquoted, PostgreSQL folds `Orders` to
            # `orders`, which is not the schema the store made.
            options += f' -c search_path="{self.schema}"'
        return options

    def connect_arguments(self) -> dict[str, Any]:
        """What psycopg's `connect` is given besides `conninfo` for a connection to the
        store: the `options` straight to PostgreSQL; behind a pooler none (PgBouncer
        refuses them: `session_settings()` says what goes instead), and no statement
        prepared by psycopg, which a transaction pooler's next transaction may not find."""
        if self.pooler is None:
            return {"options": self.options()}
        return {"prepare_threshold": None}

    def session_settings(self) -> bytes | None:
        """The statement a new connection runs first, behind a pooler (None straight to
        PostgreSQL, whose connections have `options()`): every setting for a session
        pooler's session, which is the client's until it closes; the time zone alone for
        a transaction pooler's, which PgBouncer keeps for each client and sets on each
        server connection it lends it (the rest goes in each transaction)."""
        if self.pooler is None:
            return None
        settings = [f"SET {name} TO '{value}'" for name, value in _SETTINGS]
        if self.pooler == "transaction":
            return settings[0].encode()
        if self.schema is not None:
            settings.append(f'SET search_path TO "{self.schema}"')
        return "; ".join(settings).encode()

    def transaction_begin(self) -> bytes | None:
        """Behind a transaction pooler, how each of the store's transactions begins, in one
        round trip: READ COMMITTED, the schema first in search_path for it alone (`SET
        LOCAL`: the server connection goes to another client after it). None elsewhere."""
        if self.pooler != "transaction":
            return None
        begin = "BEGIN ISOLATION LEVEL READ COMMITTED"
        if self.schema is not None:
            begin += f'; SET LOCAL search_path TO "{self.schema}"'
        return begin.encode()

    def pipeline_settings(self) -> tuple[tuple[bytes, tuple[bytes, ...] | None], ...] | None:
        """Behind a transaction pooler, the statements an append sends before its own in
        the same pipeline, so in its implicit transaction (up to the Sync): READ
        COMMITTED and the schema, for that transaction alone. None elsewhere, where an
        append sends statements prepared once in its session."""
        if self.pooler != "transaction":
            return None
        settings: list[tuple[bytes, tuple[bytes, ...] | None]] = [
            (b"SET TRANSACTION ISOLATION LEVEL READ COMMITTED", None)
        ]
        if self.schema is not None:
            path = f'"{self.schema}"'.encode()
            settings.append((b"SELECT set_config('search_path', $1, true)", (path,)))
        return tuple(settings)

    def direct_target(self) -> PostgresTarget | None:
        """Where a connection that needs a session of its own goes: PostgreSQL itself, with
        this target's schema and pool settings. This target straight to PostgreSQL or
        behind a session pooler; the URL's `direct=` behind a transaction pooler, or None
        if it names none."""
        if self.pooler == "session" or (self.pooler is None and self.direct is None):
            return self
        if self.direct is None:
            return None
        return replace(self, conninfo=self.direct, pooler=None, direct=None)


def session_target(target: PostgresTarget, what: str) -> PostgresTarget:
    """Where `what`, which needs a session of its own, connects: `target.direct_target()`;
    behind a transaction pooler whose URL names no `direct=`, `UnsupportedStoreURL` saying
    so."""
    direct = target.direct_target()
    if direct is None:
        raise UnsupportedStoreURL(
            f"{what} needs a session of its own, which a transaction pooler does not keep: "
            "add direct=postgresql://user@host:port/database (PostgreSQL itself, not the "
            "pooler) to the store's URL"
        )
    return direct


def _direct_conninfo(direct: str, pooler: str | None) -> str:
    """The libpq URI of `?direct=`, checked: PostgreSQL itself, behind a transaction
    pooler; the store's parameters are the pooled URL's."""
    if pooler != "transaction":
        raise UnsupportedStoreURL(
            "direct= names PostgreSQL itself for what a transaction pooler cannot carry: "
            "it goes with pooler=transaction"
        )
    parts = urlsplit(direct)
    if parts.scheme not in ("postgresql", "postgres") or not parts.hostname:
        raise UnsupportedStoreURL(
            "direct= is a URL to PostgreSQL itself, postgresql://user@host:port/database, "
            f"not {redacted(direct)!r}"
        )
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    own = sorted(set(query) & {"schema", "pool_size", "pool_timeout", "pooler", "direct"})
    if own:
        raise UnsupportedStoreURL(
            f"direct= takes libpq's parameters only: {', '.join(own)} goes on the store's URL"
        )
    query.setdefault("application_name", "eventcraft")
    conninfo = urlunsplit(("postgresql", _quoted_netloc(parts), parts.path, urlencode(query), ""))
    _check_conninfo(conninfo)
    return conninfo


def _check_conninfo(conninfo: str) -> None:
    """Refuse what libpq would refuse (a parameter it does not know, a port out of range)
    as the input error it is: at connect time it would read as a server not answering."""
    try:
        settings = conninfo_to_dict(conninfo)
    except psycopg.ProgrammingError as error:  # names the parameter, never the password
        raise UnsupportedStoreURL(f"a PostgreSQL store URL libpq refuses: {error}") from None
    for port in str(settings.get("port") or "").split(","):
        if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
            raise UnsupportedStoreURL(f"the port must be a number from 1 to 65535, not {port!r}")


def _quoted_netloc(parts: SplitResult) -> str:
    """The user and password of `parts` percent-encoded whole.

    An `@` cannot be in a host, so the user's part ends at the last one (as
    `urlsplit`, and so our redaction, reads it); libpq ends it at the first, and would
    take the rest of a password holding an unescaped `@` for the host, and show it in
    its error. Encoded, the password reaches the server as written, whatever it holds.
    """
    userinfo, at, host = parts.netloc.rpartition("@")
    if not at:
        return host
    user, colon, password = userinfo.partition(":")
    quoted = quote(unquote(user), safe="")
    if colon:
        quoted += ":" + quote(unquote(password), safe="")
    return f"{quoted}@{host}"


def _pool_setting(
    query: dict[str, str], name: str, default: float, kind: type[float], most: float
) -> float:
    """A pool setting taken out of the URL's query (libpq does not know it), checked."""
    given = query.pop(name, None)
    if given is None:
        return default
    try:
        value = kind(given)
    except ValueError:
        value = 0
    if not 0 < value <= most:
        what = "a whole number" if kind is int else "a number of seconds"
        raise UnsupportedStoreURL(f"{name} must be {what} above 0, at most {most:g}, not {given!r}")
    return value


def _partition_setting(given: str | None) -> int | None:
    """`?partition_events=`, checked: a whole number of positions, `PARTITION_LEAST` to
    `PARTITION_MOST`."""
    if given is None:
        return None
    try:
        size = int(given)
    except ValueError:
        size = 0
    if not PARTITION_LEAST <= size <= PARTITION_MOST:
        raise UnsupportedStoreURL(
            f"partition_events must be a whole number of events from {PARTITION_LEAST} "
            f"to 2^40 (a partition's positions), not {given!r}"
        )
    return size
