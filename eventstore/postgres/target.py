"""Where a PostgreSQL store lives: its URL read into a `PostgresTarget`.

The URL is a libpq URI with the store's own parameters besides (`schema`,
`pool_size`, `pool_timeout`), which are taken out and checked here: libpq
would refuse them. What libpq itself would refuse is refused here too, as the
input error it is, before any connection is tried.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

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
    """

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
        """The target `url` names; `UnsupportedStoreURL` for a URL libpq or the store would
        refuse, before anything is connected to."""
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
        """The libpq `options` a connection to the store is opened with (`-c` settings):
        for a connection of one's own that must see the store as the store does."""
        # UTC so that recorded_at comes back the same whatever the server's zone;
        # READ COMMITTED whatever the server's default, so that each statement
        # of the append function sees what committed before it began.
        options = "-c timezone=UTC -c default_transaction_isolation=read\\ committed"
        if self.schema is not None:
            # Quoted, as the schema is created: unquoted, PostgreSQL folds `Orders` to
            # `orders`, which is not the schema the store made.
            options += f' -c search_path="{self.schema}"'
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
