"""The append's exchange with PostgreSQL, one level below psycopg's cursors.

An append is the busiest call of the store, and at one event per append the
client's own work is as long as the server's. So it talks to libpq directly:

- its parameters go as text the store already holds (the events' JSON is
  built once, by `postgres.batch_json`), where psycopg would adapt each one;
- in the same write to the socket, after the append's Sync, goes a NOTIFY for
  waiting readers (`listener.py`). A Sync ends the append's implicit
  transaction, so the NOTIFY runs in a transaction of its own, after the
  commit. Sent from inside the append, it would take PostgreSQL's
  notification lock before the commit and keep it until the commit reached
  the disk: appenders would commit one at a time.

The append's reply is read at once; the NOTIFY's is left on the connection,
which stays in pipeline mode until `finish_outstanding` reads it: the pool
calls it before lending the connection again, and by then it has arrived.

A large batch goes in parts (`append_in_parts`), one call of the function
each, in a transaction of its own making: the client encodes the next part
while the server writes the last, where in one call the server would wait
for the whole batch to be encoded before starting.

Behind a transaction pooler (PgBouncer's `pool_mode = transaction`) a session's
prepared statement is not there in the next transaction, which may go to another
server connection, nor are the store's settings: there the call goes unnamed
(`Prepared.text`), after the target's `Settings` (READ COMMITTED, the schema in
search_path) in the same pipeline, so in the same transaction, which the Sync ends.
Still one round trip. There the NOTIFY goes before that one Sync (in the append's
transaction, sent at its commit), and every reply is read before the call returns. With
the NOTIFY's transaction left in flight, as straight to PostgreSQL, the async store's
appends through PgBouncer 1.18 now and then read a reply and a Sync more than they sent
ahead of their own (the tailing test with writer processes, 1 run in 5; the cause not
pinned down): one transaction in flight at a time holds. Notifying transactions commit
one at a time: the price of keeping one round trip there.
"""

from __future__ import annotations

import select
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn, TypeVar

import psycopg
import psycopg.sql
from psycopg import pq
from psycopg.errors import error_from_result

from ..sql.schema import APPEND_AT_ANY, APPEND_GROUP, NOTIFY_CHANNEL

T = TypeVar("T")

REPLY_TIMEOUT = 60.0
"""Longest wait for any reply, in seconds, before the connection is given up."""

APPEND = "SELECT eventcraft_append(%s, %s, %s, %s)"
"""The append function's call through psycopg, for a caller that runs it in a transaction
of its own (the ordering tests do); the last parameter is `batch_json(...).decode()`."""


Settings = tuple[tuple[bytes, tuple[bytes, ...] | None], ...] | None
"""What an append sends before its call in the same transaction, behind a transaction
pooler (`PostgresTarget.pipeline_settings`); None elsewhere: the call is prepared."""


class Prepared(NamedTuple):
    """A statement each session prepares once, by its name."""

    name: bytes
    prepare: str
    text: bytes
    """The statement itself, sent unnamed where nothing is prepared (a transaction
    pooler's sessions are not the store's)."""


def _prepared(name: str, types: str, statement: str) -> Prepared:
    return Prepared(name.encode(), f"PREPARE {name} ({types}) AS {statement}", statement.encode())


APPEND_CALL = _prepared(
    "eventcraft_append_call",
    "text, text, bigint, text",
    APPEND.replace("%s", "${}").format(1, 2, 3, 4),
)
GROUP_CALL = _prepared(
    "eventcraft_append_group_call", "text, text", f"SELECT {APPEND_GROUP}($1, $2)"
)


def notify_statement(conn: psycopg.Connection[Any]) -> bytes:
    """The NOTIFY that tells readers of this connection's schema of an append."""
    schema = conn.execute("SELECT current_schema()").fetchone()
    payload = psycopg.sql.Literal(schema[0] if schema else "")
    return f"NOTIFY {NOTIFY_CHANNEL}, {payload.as_string(conn)}".encode()


def append_and_notify(
    conn: psycopg.Connection[Any],
    params: Sequence[bytes | None],
    notify: bytes,
    statement: Prepared = APPEND_CALL,
    settings: Settings = None,
) -> str:
    """Call the append function (or `statement`) with `params`, then `notify`; its text result.
    With `settings`, the call goes unnamed, after them in its transaction.

    `conn` must have nothing left to read: the pool lends connections so, and
    a failed call reads everything before it raises.

    Raises the psycopg error the server answered with, or `OperationalError`
    when the connection fails (it is closed then, and safe to retry on another).
    """
    return _with_statement(
        conn, statement, settings, lambda: _append_once(conn, params, notify, statement, settings)
    )


def _append_once(
    conn: psycopg.Connection[Any],
    params: Sequence[bytes | None],
    notify: bytes,
    statement: Prepared,
    settings: Settings,
) -> str:
    try:
        result = _exchange(conn, params, notify, statement, settings)
        if result.status != pq.ExecStatus.TUPLES_OK:
            finish_outstanding(conn)  # the caller will use the connection to look into it
            raise error_from_result(result, encoding=conn.info.encoding)
    except psycopg.OperationalError as error:
        _give_up(conn, error)
    except psycopg.DatabaseError:
        raise  # the server's answer to a sound exchange: the connection is fine
    except BaseException as error:
        _give_up(conn, error)
    value = result.get_value(0, 0)
    assert value is not None
    return bytes(value).decode()


def _with_statement(
    conn: psycopg.Connection[Any],
    statement: Prepared,
    settings: Settings,
    exchange: Callable[[], T],
) -> T:
    """`exchange()`, run again after preparing `statement` if the session lacked it; at once
    with `settings`, which send it unnamed."""
    if settings is not None:
        return exchange()
    try:
        return exchange()
    except psycopg.errors.InvalidSqlStatementName:
        # A new session, or one that lost its prepared statements: prepare once.
        conn.execute(statement.prepare)
        return exchange()


def finish_outstanding(conn: psycopg.Connection[Any]) -> None:
    """Read what `append_and_notify` left unread on `conn`, if anything.

    Raises `OperationalError` (and closes `conn`) if the connection fails.
    """
    pgconn = conn.pgconn
    if pgconn.pipeline_status == pq.PipelineStatus.OFF:
        return
    try:
        while not _is_sync(_next_result(conn)):
            pass  # the NOTIFY's result: nobody waits on its outcome
        pgconn.exit_pipeline_mode()
    except BaseException as error:
        _give_up(conn, error)


def _exchange(
    conn: psycopg.Connection[Any],
    params: Sequence[bytes | None],
    notify: bytes,
    statement: Prepared,
    settings: Settings,
) -> pq.abc.PGresult:
    pgconn = conn.pgconn
    pgconn.enter_pipeline_mode()
    send_call(pgconn, statement, params, settings)
    if settings is None:
        pgconn.pipeline_sync()
    pgconn.send_query_params(notify, None)
    pgconn.pipeline_sync()
    _flush(conn)
    failed = None
    for _ in settings or ():
        done = _result_of_next_query(conn, skip=0)
        failed = failed or (None if done.status in _DONE else done)
    result = _next_result(conn)
    assert result is not None
    while not _is_sync(_next_result(conn)):
        pass  # the end of the append's results (and the NOTIFY's, pooled), then its Sync
    if settings is not None:
        pgconn.exit_pipeline_mode()  # nothing left to read (the module's docstring says why)
    return failed or result


_DONE = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


def send_call(
    pgconn: pq.abc.PGconn, statement: Prepared, params: Sequence[bytes | None], settings: Settings
) -> None:
    """Send `statement` with `params` in the pipeline: by its name, or unnamed after
    `settings`."""
    if settings is None:
        pgconn.send_query_prepared(statement.name, params)
        return
    for text, values in settings:
        pgconn.send_query_params(text, values)
    pgconn.send_query_params(statement.text, params)


def _next_result(conn: psycopg.Connection[Any]) -> pq.abc.PGresult | None:
    pgconn = conn.pgconn
    # is_busy parses what was already received: a syscall only when that is not enough.
    while pgconn.is_busy():
        _wait(conn, write=False)
        pgconn.consume_input()
    return pgconn.get_result()


def _is_sync(result: pq.abc.PGresult | None) -> bool:
    return result is not None and result.status == pq.ExecStatus.PIPELINE_SYNC


def _wait(conn: psycopg.Connection[Any], *, write: bool) -> bool:
    """Wait until `conn` can be read, or, with `write`, written; True if it can be read."""
    fileno = conn.fileno()
    waits = ([fileno], [fileno]) if write else ([fileno], [])
    readable, writable, _ = select.select(*waits, [], REPLY_TIMEOUT)
    if not (readable or writable):
        raise psycopg.OperationalError(f"no reply from PostgreSQL in {REPLY_TIMEOUT:.0f} s")
    return bool(readable)


def _give_up(conn: psycopg.Connection[Any], error: BaseException) -> NoReturn:
    """Close `conn`, whose state is unknown after `error`, and raise it as a lost connection."""
    conn.close()
    if isinstance(error, OSError | AssertionError):
        raise psycopg.OperationalError(f"PostgreSQL connection failed: {error}") from error
    raise error


def append_in_parts(
    conn: psycopg.Connection[Any],
    head: Sequence[bytes],
    part: Callable[[int], tuple[bytes, int] | None],
    notify: bytes,
    settings: Settings = None,
) -> list[str]:
    """Call the append function once for each part of a large batch, in one transaction
    (which `settings`, if any, begins with).

    `head` is the call's first three parameters (stream, category, expected
    version); `part(i)` is the i-th part's events as `batch_json` makes them
    and their number, or None past the last. Each part after the first
    expects the version the one before it ends at. Parts are sent as soon as
    they are encoded, without waiting for the replies to the earlier ones
    (at ANY, but for the first): the client encodes while the server writes,
    where in one call the server would wait for the whole batch first.

    Returns each call's text result. Raises as `append_and_notify` does, and
    whatever `part` raises; either way the transaction was rolled back.
    """
    return _with_statement(
        conn,
        APPEND_CALL,
        settings,
        lambda: _append_in_parts(conn, head, part, notify, settings),
    )


def _append_in_parts(
    conn: psycopg.Connection[Any],
    head: Sequence[bytes],
    part: Callable[[int], tuple[bytes, int] | None],
    notify: bytes,
    settings: Settings,
) -> list[str]:
    pgconn = conn.pgconn
    stream, category, expected = head
    answers: list[str] = []
    begun = 1 + len(settings or ())  # BEGIN and the settings: results before the first call's
    try:
        pgconn.enter_pipeline_mode()
        pgconn.send_query_params(b"BEGIN", None)
        for text, values in settings or ():
            pgconn.send_query_params(text, values)
        first = part(0)
        assert first is not None
        _send_part(conn, (stream, category, expected, first[0]), settings)
        following = part(1)  # while the server writes the first part
        if expected in (b"%d" % APPEND_AT_ANY, b"0"):
            # At ANY, where the batch starts is known from the first reply only; at no
            # stream too, as a deleted stream's versions go on after its last one.
            answers.append(_answer(conn, skip=begun))
            version = int(answers[0].split(" ", 1)[0])
        else:
            version = int(expected) + first[1]
        sent = 1
        while following is not None:
            events, count = following
            _send_part(conn, (stream, category, b"%d" % version, events), settings)
            version += count
            sent += 1
            following = part(sent)  # while the server writes the parts sent
        while len(answers) < sent:
            answers.append(_answer(conn, skip=0 if answers else begun))
        pgconn.send_query_params(b"COMMIT", None)
        if settings is None:
            pgconn.pipeline_sync()
        pgconn.send_query_params(notify, None)
        pgconn.pipeline_sync()
        _flush(conn)
        result = _result_of_next_query(conn, skip=0)
        if settings is not None:  # the NOTIFY, after the COMMIT before one Sync
            _result_of_next_query(conn, skip=0)
        if not _is_sync(_next_result(conn)) or result.status != pq.ExecStatus.COMMAND_OK:
            raise psycopg.OperationalError("PostgreSQL did not confirm the commit of an append")
        if settings is not None:
            pgconn.exit_pipeline_mode()
    except psycopg.OperationalError as error:
        _give_up(conn, error)
    except psycopg.DatabaseError:
        raise
    except BaseException as error:
        if pgconn.pipeline_status == pq.PipelineStatus.OFF or conn.closed:
            raise
        try:
            _roll_back(conn)
        except BaseException:
            _give_up(conn, error)
        raise
    return answers


def _send_part(conn: psycopg.Connection[Any], params: Sequence[bytes], settings: Settings) -> None:
    if settings is None:
        conn.pgconn.send_query_prepared(APPEND_CALL.name, params)
    else:
        conn.pgconn.send_query_params(APPEND_CALL.text, params)
    conn.pgconn.send_flush_request()  # the reply comes without waiting for a Sync
    _flush(conn)


def _answer(conn: psycopg.Connection[Any], *, skip: int) -> str:
    """The text result of the next call of the append function, after `skip` other queries;
    if the call failed, roll back and raise its error."""
    result = _result_of_next_query(conn, skip=skip)
    if result.status != pq.ExecStatus.TUPLES_OK:
        _roll_back(conn)
        raise error_from_result(result, encoding=conn.info.encoding)
    value = result.get_value(0, 0)
    assert value is not None
    return bytes(value).decode()


def _result_of_next_query(conn: psycopg.Connection[Any], *, skip: int) -> pq.abc.PGresult:
    """The result of the next query sent in pipeline mode, after `skip` others."""
    for _ in range(skip):
        while _next_result(conn) is not None:
            pass
    result = _next_result(conn)
    assert result is not None
    while _next_result(conn) is not None:
        pass  # a query's results end with a None
    return result


def _roll_back(conn: psycopg.Connection[Any]) -> None:
    """End the transaction `append_in_parts` began, reading every reply; leave pipeline mode."""
    pgconn = conn.pgconn
    pgconn.pipeline_sync()  # the end of what an error makes the server skip
    pgconn.send_query_params(b"ROLLBACK", None)
    pgconn.pipeline_sync()
    _flush(conn)
    syncs = 0
    while syncs < 2:
        result = _next_result(conn)
        syncs += _is_sync(result)
    pgconn.exit_pipeline_mode()


def _flush(conn: psycopg.Connection[Any]) -> None:
    # Replies are read while waiting to send, as libpq asks: with many parts in
    # flight, a server whose replies nobody reads stops reading what it is sent.
    while conn.pgconn.flush():
        if _wait(conn, write=True):
            conn.pgconn.consume_input()
