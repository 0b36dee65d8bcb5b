"""`immediate`: a SQLite write transaction that ends as it should, whatever ends it."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def immediate(conn: sqlite3.Connection) -> Iterator[None]:
    """A write transaction around the block: committed when it ends, rolled back when it
    raises (whatever it raises: a signal's exception too).

    `BEGIN IMMEDIATE` takes the write lock at once, so two writers never both
    read and then deadlock on upgrading. SQLite ends a transaction itself on
    some errors (a full disk, an I/O error): a ROLLBACK then fails with "no
    transaction is active" and would hide the error the caller needs, so only
    an open transaction is rolled back. A block may end the transaction
    itself (a refused lone append rolls back): then there is nothing to commit.
    A COMMIT that fails is rolled back too, so that the next BEGIN finds none open.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        if conn.in_transaction:
            conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
