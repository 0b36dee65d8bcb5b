"""The order a PostgreSQL group is sent in: by stream id, answered in the callers' order.

Two groups written at once that take their streams in one order cannot wait for each
other; sent as they arrived, two groups of 20 tasks racing on three shared streams
deadlocked now and then (PostgreSQL refused one after a second; the async store's
tasks then failed)."""

from __future__ import annotations

from eventcraft.eventstore import ANY, NewEvent
from eventcraft.eventstore.arguments import AppendCall, append_call
from eventcraft.eventstore.postgres.append_group import lock_order, restored


def _member(*streams: str) -> tuple[AppendCall, ...]:
    return tuple(append_call(s, [NewEvent("E", {})], ANY, 1 << 20) for s in streams)


def test_members_go_in_stream_order_keeping_arrival_order_among_equals() -> None:
    members = [_member("shared-2"), _member("shared-0"), _member("private-9"), _member("shared-0")]
    order = lock_order(members)
    assert [members[i][0].stream_id for i in order] == [
        "private-9",
        "shared-0",
        "shared-0",
        "shared-2",
    ]
    assert order[1:3] == [1, 3]  # the same stream's members in the order they came


def test_a_member_of_several_appends_goes_by_its_first_stream_in_order() -> None:
    members = [_member("b-1"), _member("c-1", "a-1")]
    assert lock_order(members) == [1, 0]


def test_answers_come_back_in_the_members_order() -> None:
    members = [_member("c-1"), _member("a-1"), _member("b-1")]
    order = lock_order(members)
    answers = [members[i][0].stream_id for i in order]
    assert restored(order, answers) == ["c-1", "a-1", "b-1"]
