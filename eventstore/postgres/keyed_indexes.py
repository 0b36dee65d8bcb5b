"""PostgreSQL's indexes of events by category and by type, keyed by a hash of the name.

Reads by category or type walk one range of an index in position order, so
the index holds (name, position). New entries of a name go at the end of
its range, just before the next name's: a page there is not the index's
last, and PostgreSQL splits it in two halves, except where its "split after
the new tuple" rule sees entries arriving in order, which it only trusts on
a page whose entries are all one size. Names of different lengths share the
pages at the range boundaries, so that rule never applied: the type index
of the scale benchmark filled half of each leaf page, 72 bytes an event.
Keyed by `hashtextextended(name, 0)`, a bigint, every entry is 24 bytes and
the pages fill to 90%: 32 bytes an event, and writes touch fewer pages.

A read compares both the key (what the index walks) and the name itself (so
that two names with one hash never mix); the hash is PostgreSQL's own for
hash partitioning, which keeps it across versions since partitioned tables
depend on it. SQLite's B-tree has no such split rule to miss: its indexes
keep the names (`schema.py`).
"""

from __future__ import annotations

from ..sql.schema import EVENTS

KEYED = ("category", "type")
"""The events' columns whose index is keyed by a hash."""


def index_name(column: str) -> str:
    return f"{EVENTS}_{column}_key"


INDEXES = tuple(map(index_name, KEYED))
"""Their indexes' names."""


def key(name: str) -> str:
    """The SQL of the key of `name`, an expression of SQL (a column or a parameter)."""
    return f"hashtextextended({name}, 0)"


def matches(column: str, value: str) -> str:
    """The SQL condition that `column` (one of `KEYED`) equals `value` (SQL), in the
    form its index serves."""
    return f"{key(column)} = {key(value)} AND {column} = {value}"


def create(column: str) -> str:
    return f"CREATE INDEX {index_name(column)} ON {EVENTS} ({key(column)}, position)"


def upgrades(existing: frozenset[str]) -> list[str]:
    """What brings a store of an earlier release to keyed indexes: each built (the events
    table is locked for writes meanwhile, some seconds for a million events, once) and the
    (name, position) one it replaces dropped. The query function that walks them is
    replaced with every function older than this release's (`schema.QUERY_IN_ONE`)."""
    statements: list[str] = []
    for column, index in zip(KEYED, INDEXES, strict=True):
        if index not in existing:
            statements += [create(column), f"DROP INDEX IF EXISTS {EVENTS}_{column}_position"]
    return statements
