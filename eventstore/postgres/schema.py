"""PostgreSQL's schema: the shared tables (`sql/schema.py`) with this backend's indexes,
functions and triggers, and what brings a store made by an earlier release up to date.

The global-ordering rule (PostgreSQL)
-------------------------------------
Positions come from a sequence, handed out in one order, while transactions
commit in another: a reader could see position 11 before 10 commits and move
past 10 for ever. Locking the table around every append prevents it but
serializes all writers. Instead readers follow one rule (`postgres/high_water.py`):

    a gap in positions just below row p may be passed only if no *writer* is
    still running whose xid is below the xid that inserted p,

where a writer is a transaction that has drawn, or may still draw, positions
from this store's sequence: one that holds the store's append lock.

The append function (below) does four things in this order: it takes the
append lock, a transaction-level advisory lock in shared mode keyed by the
events table (`LOG_LOCK_KEY`; appends never wait for each other on it); it
takes its top-level xid (`pg_current_xact_id()`); it takes its positions
(`nextval`); and it inserts its rows inside a subtransaction, so that each
row's `xmin` is a subtransaction xid drawn *after* every position of the
append. (The xid is drawn by the first row written, not by `nextval`: a
single row may take its position in the statement that inserts it.)

Why this is correct. A reader runs one statement: its snapshot S is taken at
the start, then it reads the lock table. Its blockers are the xids S lists as
running that, when the lock table is read, either still hold the append lock
or are no longer running (they ended after S; whether they were writers can
no longer be told, so they count). Let row p be visible in S and H hold a
position g < p that S does not show. H took the lock and its xid before g;
the sequence hands out values in call order (CACHE 1), so H took g before
p's writer took p, and p's writer drew xmin(p) after that: xid(H) < xmin(p),
since xids are handed out in order too. p's writer committed before S, so H
had its xid and the lock before S was taken, and keeps the lock until it
ends. So either H had ended before S (g is visible in S or was rolled back
and stays empty for ever), or S lists H as running, and when the lock table
is read H still holds the lock or has ended: H is a blocker below xmin(p),
and the reader does not pass g. A reader that passes the gap loses nothing.

A transaction that never takes the lock (in another database, on a user's
table, a rebuild's long write, a prepared transaction, an idle session in a
transaction) is running and holds no append lock when the reader looks: it
blocks nothing. A transaction that takes the lock later draws its positions
later, above every row the reader can see.

Reading the lock table costs a scan of the lock manager, so readers first try
the coarser rule it refines, with the snapshot's xmin (the oldest transaction
running anywhere) as the bound: one index probe, and all a read pays while
the log has no gap, or only gaps whose writers have ended. Only a read that
stops short of a committed row asks the lock table.

A large batch is written by several calls of the function in one
transaction (`postgres/wire.py`, `append_in_parts`). The argument holds for
each call's rows: the lock and the top-level xid come first, in the first
call, and each call takes its positions before its own subtransaction draws
the xid its rows carry.

Each step matters. Had H taken g before having an xid, no snapshot would
show H running, and the rule would let readers skip g. Had H drawn positions
without the lock, it would look like any other transaction and be passed.
Had p's rows been stamped with the top-level xid, drawn before p's
positions, H could hold a larger xid than p and still be running. And a
snapshot's xmax is no bound either: it is one past the highest *completed*
xid, and running xids above it are listed nowhere.

Rows store only the low 32 bits of their xid; comparing them with 64-bit
xids modulo 2**32 is exact for rows written within the last two billion
transactions, and errs on the safe side (not yet passable) for older ones.

The same rule defines the safe high-water mark that projections and the
Spark replay read up to: the highest position below which every gap is
passed by the rule.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.schema import CreateIndex, CreateSequence

from ..sql.deletion import DELETED_STREAMS
from ..sql.schema import (
    APPEND_GROUP,
    APPEND_IS_CURRENT,
    APPEND_ONLY_SQLSTATE,
    DIALECTS,
    EARLIER_LAYOUT,
    EVENTS,
    PLANS_KEPT,
    QUERY_IN_ONE,
    STREAMS,
    STREAMS_CATEGORY_INDEX,
    TAGGED,
    position_sequence,
    table_statements,
)
from . import append_functions, deletion, keyed_indexes, tag_functions

_EARLIER_NOTIFY_FUNCTION = "eventcraft_notify"
_EARLIER_APPEND = "eventcraft_append(text, text, bigint, uuid[], text[], text[], text[])"
_EARLIER_APPEND_GROUP = f"{APPEND_GROUP}(text)"

_APPEND_ONLY = [
    f"""
CREATE FUNCTION eventcraft_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = '{APPEND_ONLY_SQLSTATE}',
        MESSAGE = format('%s is append-only: %s refused', TG_TABLE_NAME, TG_OP);
END
$$""",
    f"""CREATE TRIGGER {EVENTS}_append_only BEFORE UPDATE OR DELETE ON {EVENTS}
    FOR EACH ROW EXECUTE FUNCTION eventcraft_refuse_change()""",
    f"""CREATE TRIGGER {EVENTS}_no_truncate BEFORE TRUNCATE ON {EVENTS}
    FOR EACH STATEMENT EXECUTE FUNCTION eventcraft_refuse_change()""",
]


def ddl(existing: frozenset[str] = frozenset()) -> list[str]:
    """Every statement that creates the schema, in order, but for the `existing` objects.

    `existing` names the tables the database holds, `EARLIER_LAYOUT` if it was made by
    a release that kept each stream's version in the streams table, `APPEND_IS_CURRENT`
    if its append function is this release's, `PLANS_KEPT` if its stream version and
    condition functions are plpgsql, and `QUERY_IN_ONE` if its query function is this
    release's. A store made by an older release lacks only newer objects: opening it
    adds them and brings the older ones up to date. `APPEND_GROUP` is in it when the
    group append function exists, `STREAMS_CATEGORY_INDEX` when the streams' index by
    category (dropped) does.
    """
    dialect = DIALECTS["postgresql"]
    fresh = EVENTS not in existing
    statements: list[str] = []
    if fresh:
        statements.append(str(CreateSequence(position_sequence).compile(dialect=dialect)))
    statements += table_statements(dialect, existing, _create_index)
    if EARLIER_LAYOUT in existing:
        # Versions now come from the events themselves; the commit-time NOTIFY
        # became the writer's own, sent after its commit (wire.py).
        statements.append(f"ALTER TABLE {STREAMS} DROP COLUMN version")
        statements.append(f"DROP FUNCTION IF EXISTS {_EARLIER_NOTIFY_FUNCTION}() CASCADE")
        statements.append(f"DROP FUNCTION IF EXISTS {_EARLIER_APPEND}")
    if not fresh:
        statements += keyed_indexes.upgrades(existing)
    if STREAMS_CATEGORY_INDEX in existing:
        statements.append(f"DROP INDEX IF EXISTS {STREAMS_CATEGORY_INDEX}")
    if not fresh and TAGGED not in existing:
        statements.append(f"ALTER TABLE {EVENTS} ADD COLUMN tags text[]")
    append_current = APPEND_IS_CURRENT in existing and not fresh
    if not (append_current and APPEND_GROUP in existing):
        # An older store gets this release's append functions (the append lock, times
        # kept, groups of appends, tags), which share eventcraft_insert_events.
        statements += [append_functions.STREAM_VERSION, append_functions.INSERT_EVENTS]
    if not append_current:
        statements.append(append_functions.APPEND)
    if APPEND_GROUP not in existing:
        statements.append(f"DROP FUNCTION IF EXISTS {_EARLIER_APPEND_GROUP}")
        statements += [*tag_functions.FUNCTIONS, append_functions.APPEND_GROUP_FUNCTION]
    else:
        if PLANS_KEPT not in existing:  # made while these two were sql functions
            statements += [append_functions.STREAM_VERSION, tag_functions.FIRST_MATCH]
        if QUERY_IN_ONE not in existing:
            statements.append(tag_functions.QUERY_POSITIONS)
    if DELETED_STREAMS not in existing:
        # Deleted streams: their table and functions, and in a store made before, the
        # append functions that check them (deletion.py).
        statements += deletion.ddl()
        if append_current and APPEND_GROUP in existing:
            statements += [append_functions.INSERT_EVENTS, append_functions.APPEND_GROUP_FUNCTION]
    if fresh:
        statements += _APPEND_ONLY
    return statements


def _create_index(index: sa.Index) -> str:
    """CREATE INDEX of `index`; the category and type indexes are keyed by a hash of the
    name (keyed_indexes.py)."""
    columns = [column.name for column in index.columns]
    if columns[0] in keyed_indexes.KEYED and index.table.name == EVENTS:  # type: ignore[union-attr]
        return keyed_indexes.create(columns[0])
    return str(CreateIndex(index).compile(dialect=DIALECTS["postgresql"]))
