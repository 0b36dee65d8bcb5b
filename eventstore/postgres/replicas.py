"""Reading the log from a hot standby: the ordering rule where the primary's transactions
cannot be seen.

On the primary, `high_water.py` judges a gap by the transactions that hold the store's
append lock. A standby has none of that: advisory locks are not written to the WAL, so
its `pg_locks` shows none of the primary's, and its snapshots list the primary's running
transactions in a part `pg_snapshot_xip` does not return (a standby's snapshot keeps them
all as subtransactions). Run there, the precise statement would find no blocker and pass
every gap: it must never run on a standby. What a standby does know:

- **Its snapshot's xmin.** Replay keeps the xids the primary has handed out and not yet
  ended (`KnownAssignedXids`): when a record of xid x is replayed, every xid below x not
  yet seen ending is taken as running, until its commit or abort record is replayed, or a
  running-transactions record taken on the primary after it ended. A snapshot on the
  standby has the lowest of them as its xmin.

  The coarse rule is therefore sound on the standby. Let row p be visible in the
  standby's snapshot S, and H hold a position g < p that S does not show. As on the
  primary, H had its top-level xid before g, g was drawn before p, and p's row xid was
  drawn after p: xid(H) < xmin(p). p is visible, so p's commit record was replayed, and
  with it every xid up to p's was known: either H's end was replayed before S (g is
  visible in S, or rolled back and empty for ever), or xid(H) is still known running,
  and S's xmin is at most xid(H), below xmin(p). The coarse statement passes a gap only
  under a row whose xid is below S's xmin: it never passes g.

- **How far it has replayed** (`pg_last_wal_replay_lsn()`).

The coarse rule alone stalls behind any transaction with an xid on the primary, in any
database, as it does on the primary before the precise rule judges again: a stranger
could hold a standby's readers back for as long as it runs. So when the coarse statement
stops short of a committed row, the reader asks the primary: its high-water mark M by
the full rule, then `pg_current_wal_insert_lsn()` L, on the same connection, after. Every
row up to M was committed when M was judged and every gap below M is final; each of
those commits inserted its commit record before the snapshot that saw it, so below L.
Once the standby has replayed up to L it shows every row up to M, and nothing can appear
below M later: the reader may go up to M. Until it has (replay lags or is paused), the
reader keeps the standby's own coarse mark; that is lag, not a stall, and it moves when
replay does. Each of the two marks is sound alone; the reader takes the larger.

When the primary cannot be reached, the reader keeps the coarse mark: sound, and moving
whenever the transactions below it end. A standby that has been promoted is a primary:
it holds the append lock of the appends made to it, and the full rule of `high_water.py`
is used there (`pg_is_in_recovery()` is asked before the primary is). Positions the old
primary drew are never drawn again by the promoted one: a sequence writes its next
values to the WAL ahead of handing them out, and everything the old primary's mark
counted was replayed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg

from ..errors import UnsupportedStoreURL
from . import high_water

REPLICA_OPTION = "replica"
"""The store URL's option naming a read replica: `?replica=` and the standby's URL,
percent-encoded (`with_replicas` writes it)."""

PrimaryMark = tuple[int, str]
"""The primary's high-water mark above a position and its WAL insert position then
(an LSN as text)."""

_COARSE, _ = high_water.statements(high_water.WALK)
_IN_RECOVERY = "SELECT pg_is_in_recovery()"
_REPLAYED = "SELECT coalesce(pg_last_wal_replay_lsn() >= %s::pg_lsn, false)"
_INSERTED = "SELECT pg_current_wal_insert_lsn()::text"
_LAG = """
SELECT pg_is_in_recovery(),
       coalesce(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()), 0),
       extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8
"""


def with_replicas(url: str, replicas: Sequence[str]) -> str:
    """`url` with `replicas` as its `?replica=` options (checked when the store opens)."""
    if isinstance(replicas, str) or not all(isinstance(r, str) for r in replicas):
        raise UnsupportedStoreURL("replicas= takes a list of store URLs, one for each standby")
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    query += [(REPLICA_OPTION, replica) for replica in replicas]
    return urlunsplit(parts._replace(query=urlencode(query)))


def split_url(url: str) -> tuple[str, str | None]:
    """The primary's URL (without `?replica=`) and the standby's, if the URL names one.

    The standby's URL reads the store's schema unless it names one (the same, or it is
    refused): a replica holds the primary's tables, under the same names.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    named = [value for key, value in query if key == REPLICA_OPTION]
    if not named:
        return url, None
    if len(named) > 1:
        raise UnsupportedStoreURL(
            f"a store reads from one replica for now, not {len(named)}: name one ?replica="
        )
    rest = [(key, value) for key, value in query if key != REPLICA_OPTION]
    primary = urlunsplit(parts._replace(query=urlencode(rest)))
    replica = urlsplit(named[0])
    if replica.scheme not in ("postgresql", "postgres", "postgresql+psycopg"):
        raise UnsupportedStoreURL(
            "?replica= is the URL of a PostgreSQL standby (postgresql://user@host:port/db, "
            f"percent-encoded), not one that begins {named[0].split(':', 1)[0]!r}"
        )
    schema = dict(rest).get("schema")
    own = dict(parse_qsl(replica.query, keep_blank_values=True))
    if "schema" in own and own["schema"] != schema:
        raise UnsupportedStoreURL(
            f"the replica's schema ({own['schema']!r}) must be the store's ({schema!r})"
        )
    if schema is not None:
        own["schema"] = schema
    return primary, urlunsplit(replica._replace(query=urlencode(own)))


def primary_mark(conn: psycopg.Connection[Any], after: int) -> PrimaryMark:
    """The primary's mark above `after`, then its WAL insert position (in that order)."""
    mark = high_water.safe_head(conn, after)
    row = conn.execute(_INSERTED).fetchone()
    assert row is not None
    return mark, str(row[0])


async def primary_mark_async(conn: psycopg.AsyncConnection[Any], after: int) -> PrimaryMark:
    """`primary_mark` on an async connection."""
    mark = await high_water.safe_head_async(conn, after)
    row = await (await conn.execute(_INSERTED)).fetchone()
    assert row is not None
    return mark, str(row[0])


def standby_head(
    conn: psycopg.Connection[Any], after: int, primary: Callable[[int], PrimaryMark | None]
) -> int:
    """The high-water mark above `after` for a reader of the standby on `conn`.

    `primary(after)` is the primary's `primary_mark`, or None when it cannot be asked.
    """
    head, waiting = _answer(conn.execute(_COARSE, {"after": after}).fetchone(), after)
    if not waiting:
        return head
    if not _one(conn.execute(_IN_RECOVERY).fetchone()):
        return high_water.safe_head(conn, after)  # promoted: a primary, the full rule
    judged = primary(after)
    if judged is None or judged[0] <= head:
        return head
    mark, lsn = judged
    return mark if _one(conn.execute(_REPLAYED, (lsn,)).fetchone()) else head


async def standby_head_async(
    conn: psycopg.AsyncConnection[Any],
    after: int,
    primary: Callable[[int], Awaitable[PrimaryMark | None]],
) -> int:
    """`standby_head` on an async connection."""
    row = await (await conn.execute(_COARSE, {"after": after})).fetchone()
    head, waiting = _answer(row, after)
    if not waiting:
        return head
    if not _one(await (await conn.execute(_IN_RECOVERY)).fetchone()):
        return await high_water.safe_head_async(conn, after)
    judged = await primary(after)
    if judged is None or judged[0] <= head:
        return head
    mark, lsn = judged
    replayed = await (await conn.execute(_REPLAYED, (lsn,))).fetchone()
    return mark if _one(replayed) else head


def _answer(row: tuple[Any, ...] | None, after: int) -> tuple[int, bool]:
    return (int(row[0]), bool(row[1])) if row else (after, False)


def _one(row: tuple[Any, ...] | None) -> bool:
    return bool(row and row[0])
