"""The sync PostgreSQL backend's appends: alone, in parts, or in groups.

Not generated from `async_appends.py`, nor it from this: here the lead of a
group passes to one caller's thread (`group_commit.GroupCommit`), which writes
the group and settles each refused member on its own connection, where the
async store queues its tasks' appends for sender tasks and each caller settles
its own refusal. What a refused member comes to is decided by the same
functions (`append_group.py`), and both send the same prepared statements (unnamed
after the target's settings behind a transaction pooler: `wire.py`). Their pool runs them
unscoped (`ConnectionPool.run`), as their pipelines carry the settings; what they read
besides goes in a scoped transaction.

An append is one round trip: a call of the `eventcraft_append` function
(`schema.py`) in autocommit, which checks the expected version, takes the
positions and inserts the events in one transaction, followed by a NOTIFY
for waiting readers (`wire.py` says how, and why not inside it). A batch of
more than `PART` events goes in parts, in one transaction. Appends from
threads waiting at once are written together (`group_commit.py`) as one call of
`eventcraft_append_group`, each member in a subtransaction of its own; what
a refused member comes to is decided by `append_group.py`, as on the async store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import psycopg

from ..arguments import AppendCall
from ..encoding import PreparedBatch
from ..errors import EventStoreError, StoreUnavailable
from ..events import AppendResult
from ..group_commit import GroupCommit, interrupted_append
from ..idempotency import StoredId
from . import privileges
from . import statements as sql
from .append_group import (
    Answer,
    Member,
    Refusal,
    events_json,
    group_answers,
    group_param,
    hurried,
    lock_order,
    lost_races,
    member_json,
    refusal_of,
    restored,
    settled,
    stored_ids_param,
)
from .connections import ConnectionPool
from .statements import ANY_TRIES, PART, batch_json
from .tag_locks import group_locks, plain
from .wire import GROUP_CALL, append_and_notify, append_in_parts, finish_outstanding


class Appends:
    """Appends on `pool`'s connections, each followed by `notify`; grouped unless
    `group_commit` is off."""

    def __init__(self, pool: ConnectionPool, notify: bytes, *, group_commit: bool) -> None:
        self._pool = pool
        self._notify = notify
        self._settings = pool.target.pipeline_settings()  # behind a transaction pooler
        self._groups = (
            GroupCommit(self._write_group, hurried=hurried, interrupted=interrupted_append)
            if group_commit
            else None
        )

    def append(self, call: AppendCall) -> AppendResult:
        if plain(call) and (self._groups is None or len(call.batch) > PART):
            # A large batch is sent in parts, encoded while the server writes: alone.
            return self._append_alone(call)
        return self.append_many((call,))[0]

    def append_many(self, calls: Sequence[AppendCall]) -> list[AppendResult]:
        member = tuple(calls)
        # Encoded on the caller's thread, before it joins a group: an event that cannot
        # be encoded fails its caller alone, and the group's leader only sends.
        for call in member:
            call.batch.all()
        if self._groups is not None:
            return self._groups.submit(member)
        (outcome,) = self._write_group([member])
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def close(self) -> None:
        """Nothing to wait for: each group is written by a caller's thread, in its call."""

    def _write_group(self, members: Sequence[Member]) -> list[list[AppendResult] | BaseException]:
        """Each member's results or error, the members (their events encoded) written in
        one transaction."""
        since = self._groups.submitted() if self._groups is not None else None
        if len(members) == 1 and len(members[0]) == 1 and plain(members[0][0]):
            try:  # a lone append goes exactly as it would ungrouped
                return [[self._append_alone(members[0][0], since)]]
            except EventStoreError as error:
                return [error]
        order = lock_order(members)
        ordered = [members[index] for index in order]
        params = (group_param([_member_json(m) for m in ordered]), group_locks(ordered))
        sent = self._send_group(ordered, params, since)
        return restored(order, sent)

    def _send_group(
        self, members: Sequence[Member], params: tuple[bytes, bytes | None], since: float | None
    ) -> list[list[AppendResult] | BaseException]:
        """Send the group, once more on a new connection if the first one broke (a member
        that did commit is then recognised by its event ids)."""

        def attempt(conn: psycopg.Connection[Any]) -> list[list[AppendResult] | BaseException]:
            text = append_and_notify(conn, params, self._notify, GROUP_CALL, self._settings)
            answers = group_answers(text, len(members))
            return [
                self._settle(conn, member, answer)
                for member, answer in zip(members, answers, strict=True)
            ]

        try:
            return self._pool.run(attempt, since, scoped=False)
        except psycopg.errors.DeadlockDetected:
            # Members of two groups waiting for each other's streams: one group is
            # refused. Its members go again one by one, which cannot deadlock.
            return [outcome for member in members for outcome in self._write_group([member])]
        except psycopg.OperationalError as error:
            broken = error
        except psycopg.Error as error:
            return [
                _failure(privileges.translated(self._pool, error, privileges.APPENDING), error)
            ] * len(members)
        try:
            return self._pool.run(attempt, since, scoped=False)
        except (psycopg.OperationalError, StoreUnavailable) as again:
            return [
                _failure(sql.outcome_unknown(member[0].stream_id, broken, again), broken)
                for member in members
            ]
        except psycopg.Error as error:
            return [
                _failure(privileges.translated(self._pool, error, privileges.APPENDING), error)
            ] * len(members)

    def _settle(
        self, conn: psycopg.Connection[Any], member: Member, answer: Answer
    ) -> list[AppendResult] | BaseException:
        """A member's results once refused: its earlier ones if it is a retry, the
        results of sending it again if it lost a race at ANY, or its error."""
        for _ in range(ANY_TRIES):
            if not isinstance(answer, Refusal):
                return answer
            outcome = self._settled(conn, member, answer)
            if outcome is not None:
                return outcome
            params = (group_param([_member_json(member)]), group_locks([member]))
            text = append_and_notify(conn, params, self._notify, GROUP_CALL, self._settings)
            (answer,) = group_answers(text, 1)
        return lost_races(member[0].stream_id)

    def _settled(
        self, conn: psycopg.Connection[Any], member: Member, refusal: Refusal
    ) -> list[AppendResult] | EventStoreError | None:
        """`group.settled` for `member`, with the stored events of its ids read on `conn`."""
        finish_outstanding(conn)  # the NOTIFY's reply, before a query of our own
        params = (stored_ids_param(member),)
        rows = self._pool.scoped(conn, lambda c: c.execute(sql.STORED_IDS, params).fetchall())
        return settled(member, refusal, [StoredId(*row) for row in rows])

    def _append_alone(self, call: AppendCall, since: float | None = None) -> AppendResult:
        stream_id, _, batch, expected, _ = call
        head = sql.append_head(*call[:2], expected)
        if len(batch) > PART:
            send = self._in_parts(head, batch)
        else:
            params = (*head, batch_json(batch.all(), batch.annotated))

            def send(conn: psycopg.Connection[Any]) -> list[str]:
                return [append_and_notify(conn, params, self._notify, settings=self._settings)]

        def attempt(conn: psycopg.Connection[Any]) -> AppendResult:
            for _ in range(ANY_TRIES):
                try:
                    answers = send(conn)
                except psycopg.DatabaseError as error:
                    refusal = refusal_of(error)
                    if refusal is None:
                        raise
                    outcome = self._settled(conn, (call,), refusal)
                    if isinstance(outcome, BaseException):
                        raise outcome from error
                    if outcome is not None:
                        return outcome[0]
                    continue  # lost the race for the next version at ANY: read it again
                return sql.append_result(answers)
            raise lost_races(stream_id)

        return self._appending(stream_id, attempt, since)

    def _in_parts(
        self, head: tuple[bytes, ...], batch: PreparedBatch
    ) -> Callable[[psycopg.Connection[Any]], list[str]]:
        """The exchange that writes a large batch PART events at a time, in one transaction."""
        parts: list[tuple[bytes, int]] = []  # encoded once, for every attempt

        def part(index: int) -> tuple[bytes, int] | None:
            if index == len(parts) and index * PART < len(batch):
                events = batch.encoded(index * PART, (index + 1) * PART)
                parts.append((batch_json(events, batch.annotated), len(events)))
            return parts[index] if index < len(parts) else None

        return partial(
            append_in_parts, head=head, part=part, notify=self._notify, settings=self._settings
        )

    def _appending(
        self,
        stream_id: str,
        attempt: Callable[[psycopg.Connection[Any]], AppendResult],
        since: float | None,
    ) -> AppendResult:
        """`attempt`, sent once more on a new connection if the first one broke.

        Safe to resend: a batch that did commit is recognised by its event ids
        and answered with its original result. When the second try cannot be
        made either, whether the first committed is unknown, and the caller is
        told so, with the error that broke the connection as the cause.
        """
        try:
            return self._pool.run(attempt, since, scoped=False)
        except psycopg.OperationalError as error:
            broken = error
        except psycopg.Error as error:
            raise self._translated(error) from error
        try:
            return self._pool.run(attempt, since, scoped=False)
        except (psycopg.OperationalError, StoreUnavailable) as again:
            raise sql.outcome_unknown(stream_id, broken, again) from broken
        except psycopg.Error as error:
            raise self._translated(error) from error

    def _translated(self, error: psycopg.Error) -> EventStoreError:
        return privileges.translated(self._pool, error, privileges.APPENDING)


def _member_json(member: Member) -> bytes:
    return member_json(member, [events_json(call) for call in member])


def _failure(error: EventStoreError, cause: BaseException) -> EventStoreError:
    error.__cause__ = cause
    return error
