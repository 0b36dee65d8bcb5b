"""Tags cross the brokers: a relay selects events by a query of types and tags and sends
their tags in a header; an inbox whose mapping keeps them stores the events tagged."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import aio_pika
import orjson
import pytest
from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem
from eventcraft.messaging import (
    TAGS_HEADER,
    Inbox,
    IncomingMessage,
    InvalidMessage,
    JetStreamSource,
    Mapped,
    RabbitMQSource,
    Relay,
    Source,
)
from eventcraft.messaging.loop import EventLoopThread

from .brokers import wait_for
from .conftest import Target


def enrolled(student: str, course: str) -> NewEvent:
    return NewEvent(
        "StudentEnrolled",
        {"student": student, "course": course},
        tags=[f"student:{student}", f"course:{course}"],
    )


def kept_tags(message: IncomingMessage) -> Mapped:
    body = message.json()
    return Mapped(f"enrolment-{body['student']}", "StudentEnrolled", body, tags=message.tags)


@pytest.fixture
def source(target: Target, loop: EventLoopThread) -> Iterator[Source]:
    """What a consuming service takes in: a queue bound to the target's exchange, or a
    durable consumer of its JetStream stream."""
    tag = uuid.uuid4().hex[:10]
    if target.kind == "rabbitmq":
        queue = f"ec-tags-{tag}"
        taking: Source = RabbitMQSource(target.url, queue=queue, bindings=[(target.name, "#")])
    else:
        taking = JetStreamSource(target.url, stream=target.stream, durable=f"tags{tag}")
    yield taking
    taking.close()
    if target.kind == "rabbitmq":

        async def delete() -> None:
            connection = await aio_pika.connect(target.url, timeout=10)
            channel = await connection.channel()
            await channel.queue_delete(queue)
            await connection.close()

        loop.run(delete(), 20)


def test_a_relay_selected_by_a_query_publishes_the_matching_events_with_their_tags(
    target: Target, source: Source
) -> None:
    course = Query([QueryItem(types=["StudentEnrolled"], tags=["course:c1"])])
    with EventStore.open("memory://") as orders, EventStore.open("memory://") as roster:
        orders.append("enrolment-s1", [enrolled("s1", "c1"), enrolled("s1", "c2")])
        orders.append("enrolment-s2", [enrolled("s2", "c1")])
        orders.append("note-1", [NewEvent("Noted", {"student": "s3", "course": "c1"})])
        with (
            Relay("roster-out", orders, target.publisher(), query=course) as relay,
            Inbox("roster-in", roster, kept_tags, source) as inbox,
        ):
            inbox.step(timeout=0.1)  # connects: a RabbitMQ queue is declared and bound
            relay.catch_up()
            wait_for(lambda: inbox.step(timeout=0.1) >= 0 and inbox.stored >= 2, 30, "inbox")
            status = relay.status()
        received = target.read(lambda got: len(got) >= 2, 20)
        stored = list(roster.read_all())
        answered = roster.read_query(course).events
    assert [orjson.loads(m.body) for m in received] == [
        {"student": "s1", "course": "c1"},
        {"student": "s2", "course": "c1"},
    ]
    assert [orjson.loads(m.headers[TAGS_HEADER]) for m in received] == [
        ["course:c1", "student:s1"],
        ["course:c1", "student:s2"],
    ]
    assert status.position == 4 and status.published == 2
    assert [(e.stream_id, e.tags) for e in stored] == [
        ("enrolment-s1", ("course:c1", "student:s1")),
        ("enrolment-s2", ("course:c1", "student:s2")),
    ]
    # The receiving store answers the same query with the same events.
    assert [e.data for e in answered] == [e.data for e in stored]


def test_an_untagged_event_travels_without_a_tags_header(target: Target) -> None:
    with EventStore.open("memory://") as store:
        store.append("order-1", [NewEvent("OrderPlaced", {"n": 1})])
        with Relay("out", store, target.publisher()) as relay:
            relay.catch_up()
        (received,) = target.read(lambda got: len(got) >= 1, 20)
    assert TAGS_HEADER not in received.headers
    assert IncomingMessage("m", received.body, {}).tags == ()


@pytest.mark.parametrize(
    "header", ["course:c1", '{"tags": ["course:c1"]}', '["course:c1", 7]', "[", "null"]
)
def test_a_tags_header_that_is_not_a_json_array_of_strings_sends_the_message_to_the_error_store(
    header: str,
) -> None:
    message = IncomingMessage("m-1", b'{"student": "s1"}', {TAGS_HEADER: header})
    with pytest.raises(InvalidMessage, match=f"m-1.*the {TAGS_HEADER} header is not a JSON"):
        _ = message.tags
    with EventStore.open("memory://") as store, Inbox("in", store, kept_tags) as inbox:
        assert inbox.take(message) is None
        (failure,) = inbox.failures()
        assert failure.message_id == "m-1" and TAGS_HEADER in failure.error
        assert list(store.read_all()) == []


def test_a_tag_the_store_refuses_sends_the_message_to_the_error_store() -> None:
    message = IncomingMessage("m-2", b'{"student": "s1"}', {TAGS_HEADER: '["bad\\u0000tag"]'})
    with EventStore.open("memory://") as store, Inbox("in", store, kept_tags) as inbox:
        assert inbox.take(message) is None
        assert [f.message_id for f in inbox.failures()] == ["m-2"]
        assert list(store.read_all()) == []
