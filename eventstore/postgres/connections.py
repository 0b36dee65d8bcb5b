"""Connections to PostgreSQL: URL parsing, a small pool, driver errors translated.

A store needs only a few connections at once (one per thread appending or
reading), so the pool is a list of idle ones: a connection broken by the
server or the network is dropped on return and a new one opened next time.
Every connection the pool opened is kept for reuse, up to its size: a new
one costs the server a process, and that process its caches and plans, which
the store's functions fill again on their first calls.

A connection may come back with a reply still to read (`wire.py`):
it is read when the connection is next lent, by which time it has arrived.
"""

from __future__ import annotations

import re
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import orjson
import psycopg
from psycopg import pq
from psycopg.conninfo import conninfo_to_dict
from psycopg.types.json import set_json_loads

from ..errors import PoolExhausted, StoreUnavailable, UnsupportedStoreURL
from .wire import finish_outstanding

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

T = TypeVar("T")

POOL_SIZE = 10
"""Default for the most connections a store's pool opens at once (`?pool_size=` in the URL).

Ten serve dozens of threads: appends waiting together share one connection
(group commit), and readers hold one only while a page is read. The
listener that wakes waiting readers keeps one more of its own."""

POOL_TIMEOUT = 30.0
"""Default for the longest a caller waits for a pooled connection, in seconds
(`?pool_timeout=` in the URL), before `PoolExhausted` is raised."""

_MOST_POOL_SIZE = 1000


@dataclass(frozen=True)
class PostgresTarget:
    """Where a PostgreSQL store lives."""

    conninfo: str
    """A libpq URI without the store's own parameters."""
    schema: str | None
    """The schema holding the store's tables; None for the server's search_path."""
    pool_size: int = POOL_SIZE
    """The most connections the store's pool opens at once."""
    pool_timeout: float = POOL_TIMEOUT
    """The longest a caller waits for a connection, in seconds."""

    @classmethod
    def from_url(cls, url: str) -> PostgresTarget:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        schema = query.pop("schema", None)
        pool_size = _pool_setting(query, "pool_size", POOL_SIZE, int, _MOST_POOL_SIZE)
        pool_timeout = _pool_setting(query, "pool_timeout", POOL_TIMEOUT, float, 3600.0)
        query.setdefault("application_name", "eventcraft")  # tells operators whose connection it is
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
        return cls(conninfo, schema, int(pool_size), float(pool_timeout))

    def options(self) -> str:
        # UTC so that recorded_at comes back the same whatever the server's zone;
        # READ COMMITTED whatever the server's default, so that each statement
        # of the append function sees what committed before it began.
        options = "-c timezone=UTC -c default_transaction_isolation=read\\ committed"
        if self.schema is not None:
            options += f" -c search_path={self.schema}"
        return options


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


def _alive(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """False if the server has said something on an idle connection: its goodbye.

    The server sends an idle connection nothing but the error it closes it
    with (a restart, a terminated backend, a session timeout), so one poll of
    the socket tells, before an append is sent into a dead connection and its
    outcome becomes unknown. A connection with a reply outstanding (pipeline
    mode) has something to read, and is judged by reading it.
    """
    if conn.pgconn.pipeline_status != pq.PipelineStatus.OFF:
        return True
    return not _readable(conn)


def _readable(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether the server has sent `conn` something not yet read (one poll, no wait); a
    connection libpq already knows is lost has its failure to read."""
    try:
        socket = conn.pgconn.socket
    except psycopg.OperationalError:
        return True
    readable, _, _ = select.select([socket], [], [], 0)
    return bool(readable)


class ConnectionPool:
    """At most `target.pool_size` connections lent at once; further callers wait for one
    up to `target.pool_timeout` seconds, then get `PoolExhausted`."""

    def __init__(self, target: PostgresTarget) -> None:
        self.target = target
        self._idle: list[psycopg.Connection[tuple[object, ...]]] = []
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(target.pool_size)
        self._closed = False

    def connect(self) -> psycopg.Connection[tuple[object, ...]]:
        try:
            conn = psycopg.connect(
                self.target.conninfo, autocommit=True, options=self.target.options()
            )
        except psycopg.Error as error:
            raise StoreUnavailable(f"cannot connect to PostgreSQL: {error}") from error
        set_json_loads(orjson.loads, conn)
        return conn

    def run(
        self,
        call: Callable[[psycopg.Connection[tuple[object, ...]]], T],
        since: float | None = None,
    ) -> T:
        """`call` on a connection in autocommit mode, given back to the pool afterwards;
        the wait for a connection counted from `since` (`time.monotonic()`) if given.

        A method rather than a context manager: this wraps every statement the
        store runs, and a generator-based context manager costs more than it.
        """
        timeout = self.target.pool_timeout
        if since is not None:
            timeout = max(0.0, timeout - (time.monotonic() - since))
        if not self._slots.acquire(timeout=timeout):
            raise PoolExhausted(self.target.pool_size, self.target.pool_timeout)
        try:
            return self._run(call)
        finally:
            self._slots.release()

    def _run(self, call: Callable[[psycopg.Connection[tuple[object, ...]]], T]) -> T:
        with self._lock:
            if self._closed:
                raise StoreUnavailable("the event store is closed")
            conn = self._idle.pop() if self._idle else None
        if conn is not None and not _alive(conn):
            conn.close()
            conn = None
        if conn is not None:
            try:
                finish_outstanding(conn)
            except psycopg.OperationalError:
                conn = None
        if conn is None:
            conn = self.connect()
        try:
            return call(conn)
        finally:
            self._give_back(conn)

    def _give_back(self, conn: psycopg.Connection[tuple[object, ...]]) -> None:
        reusable = not conn.closed and not conn.broken
        # In pipeline mode, a reply waits for finish_outstanding: no transaction is open.
        settled = reusable and (
            conn.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF
            or conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        )
        if reusable and not settled:
            try:
                conn.rollback()
            except psycopg.Error:
                reusable = False
        with self._lock:
            if reusable and not self._closed:  # never more than pool_size: all are lent here
                self._idle.append(conn)
                return
        conn.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


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
