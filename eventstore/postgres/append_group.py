"""A group of appends in one call of `eventcraft_append_group`, for the sync and async
backends alike: what is sent, what the answer means, and what a refusal raises.

A *member* is what one caller asked for: one append, or the appends of one
`append_many`, committed all or none. The function runs each member in a
subtransaction of its own, so a member refused (a wrong version, an id
already stored) is rolled back alone while the others commit together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, TypeVar

import orjson
import psycopg

from ..arguments import AppendCall
from ..errors import (
    AppendConditionFailed,
    EventStoreError,
    StreamFull,
    StreamTombstoned,
    WrongExpectedVersion,
)
from ..events import ANY, AppendResult
from ..idempotency import StoredId, resolve_stored_appends
from ..sql import schema
from ..sql.deletion import STREAM_TOMBSTONED_SQLSTATE
from .statements import ANY_TRIES, append_result, batch_json, expected_code, query_json

Member = Sequence[AppendCall]
T = TypeVar("T")


class Refusal(NamedTuple):
    """Why the group function rolled one member back."""

    sqlstate: str
    which: int
    """Which of the member's appends was refused (0 for the first)."""
    detail: str
    """The stream's actual version (a version refused), or the constraint violated."""


Answer = list[AppendResult] | Refusal


def hurried(member: Member) -> bool:
    """Whether `member` gets a group beside the one in flight at once (`group_commit.py`):
    a conditional append, whose read grows stale while it waits."""
    return any(call.condition is not None for call in member)


def events_json(call: AppendCall) -> bytes:
    """One append's events as the append function takes them. An event that cannot be
    encoded raises `InvalidEvent`: encode before sending, for that caller alone."""
    return batch_json(call.batch.all(), call.batch.annotated)


def member_json(member: Member, events: Sequence[bytes]) -> bytes:
    """One member as the group function takes it, with its appends' `events_json`."""
    return orjson.dumps(
        [_append_json(call, json) for call, json in zip(member, events, strict=True)]
    )


def _append_json(call: AppendCall, events: bytes) -> list[object]:
    """[stream, category, expected, events], and a conditional append's condition."""
    sent: list[object] = [
        call.stream_id,
        call.category,
        expected_code(call.expected),
        orjson.Fragment(events),
    ]
    if call.condition is not None:
        query = call.condition.fail_if_events_match
        sent.append({"q": query_json(query), "a": call.condition.after})
    return sent


def lock_order(members: Sequence[Member]) -> list[int]:
    """The order to send `members` in: by stream id, so that two groups written at once
    never wait for each other's rows. A member inserting into a stream waits for an
    uncommitted row of that stream in another group; with both groups in stream order,
    the one waited for never waits in turn for a stream the waiter wrote before. (A
    member of several appends keeps its own order: two such may still meet, and PostgreSQL
    then refuses one group, whose members the writers send again one by one.)"""
    return sorted(range(len(members)), key=lambda i: min(call.stream_id for call in members[i]))


def restored(order: Sequence[int], answers: Sequence[T]) -> list[T]:
    """`answers` to members sent in `order`, back in the members' own order."""
    result: list[T] = list(answers)
    for sent, index in enumerate(order):
        result[index] = answers[sent]
    return result


def group_param(members: Sequence[bytes]) -> bytes:
    """The group function's parameter: the members as `member_json` made them."""
    return b"[" + b",".join(members) + b"]"


def refusal_of(error: psycopg.DatabaseError) -> Refusal | None:
    """The `Refusal` a lone call of the append function met, as the group function would
    report it; None for an error that is no refusal of the append."""
    if error.sqlstate == schema.WRONG_EXPECTED_VERSION_SQLSTATE:
        return Refusal(error.sqlstate, 0, error.diag.message_detail or "0")
    if isinstance(error, psycopg.errors.UniqueViolation):
        return Refusal(error.sqlstate or "23505", 0, error.diag.constraint_name or "")
    if error.sqlstate in (STREAM_TOMBSTONED_SQLSTATE, schema.STREAM_FULL_SQLSTATE):
        return Refusal(error.sqlstate, 0, error.diag.message_detail or "")
    return None


def group_answers(text: str, members: int) -> list[Answer]:
    """Each member's answer from the function's text result."""
    answers: list[Answer] = []
    for line in text.split("\n"):
        if line.startswith("!"):
            sqlstate, index, detail = line[1:].split(" ", 2)
            answers.append(Refusal(sqlstate, int(index), detail))
        else:
            answers.append([append_result([part]) for part in line.split(",")])
    if len(answers) != members:
        raise EventStoreError(f"PostgreSQL answered {len(answers)} appends of a group of {members}")
    return answers


def stored_ids_param(member: Member) -> list[object]:
    """The parameter of `STORED_IDS` for all of a member's events."""
    return [id for call in member for id in call.batch.ids]


def settled(
    member: Member, refusal: Refusal, stored: Sequence[StoredId]
) -> list[AppendResult] | EventStoreError | None:
    """What a refused member comes to, given the events of its ids already stored.

    Its original results when it is a retry of a member that committed;
    None when it lost the race for a stream's next version at ANY and is
    worth sending again; otherwise the error to raise to its caller.
    """
    if refusal.sqlstate == STREAM_TOMBSTONED_SQLSTATE:  # even a retry: it takes nothing now
        return StreamTombstoned(member[refusal.which].stream_id)
    try:
        earlier = resolve_stored_appends(
            [(call.stream_id, call.batch.ids) for call in member], stored
        )
    except EventStoreError as error:
        return error
    if earlier is not None:
        return earlier
    call = member[refusal.which]
    if refusal.sqlstate == schema.STREAM_FULL_SQLSTATE:
        return StreamFull(call.stream_id, int(refusal.detail))
    if refusal.sqlstate == schema.CONDITION_FAILED_SQLSTATE and call.condition is not None:
        condition = call.condition
        return AppendConditionFailed(
            call.stream_id, condition.fail_if_events_match, condition.after, int(refusal.detail)
        )
    if refusal.sqlstate == schema.WRONG_EXPECTED_VERSION_SQLSTATE:
        if call.expected is ANY:
            return None
        return WrongExpectedVersion(call.stream_id, call.expected, int(refusal.detail or 0))
    return EventStoreError(
        f"append to stream {call.stream_id!r} failed: {refusal.detail} "
        f"(SQLSTATE {refusal.sqlstate})"
    )


def lost_races(stream_id: str) -> EventStoreError:
    """What an append at ANY that kept losing the race for the next version raises."""
    return EventStoreError(
        f"append to stream {stream_id!r} at ANY lost the race for the next version "
        f"{ANY_TRIES} times in a row"
    )
