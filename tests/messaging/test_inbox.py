"""Inboxes store each message once by its id and acknowledge only after the append."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from eventcraft.eventstore import EventStore
from eventcraft.messaging import (
    Inbox,
    IncomingMessage,
    InvalidMessage,
    Mapped,
    MessagingConfigError,
    event_id_for,
)

from ..processes import PROCESSES
from .brokers import TcpProxy, wait_for
from .queues import Producer
from .workers import order_received, take_in_until_killed


def orders(count: int) -> list[tuple[str, bytes]]:
    return [(f"msg-{n}", orjson.dumps({"order": n % 7, "n": n})) for n in range(count)]


def stored_ids(store: EventStore) -> list[str]:
    return [e.metadata["message_id"] for e in store.read_all()]


def test_messages_delivered_many_times_are_stored_once(producer: Producer, sqlite_url: str) -> None:
    sent = orders(40)
    with EventStore.open(sqlite_url) as store:
        # Every message sent five times over, as a producer retrying would.
        for _ in range(5):
            producer.send(sent)
        with Inbox("orders-in", store, order_received, producer.source()) as inbox:
            inbox.start()
            wait_for(lambda: producer.pending() == 0 and inbox.stored >= 200, 60, "the inbox")
        ids = stored_ids(store)
        events = list(store.read_all())
    assert sorted(ids) == sorted(m for m, _ in sent)
    assert all(e.id == event_id_for("orders-in", e.metadata["message_id"]) for e in events)
    # Each order's stream holds its messages in the order they were sent.
    for stream in {e.stream_id for e in events}:
        ns = [e.data["n"] for e in events if e.stream_id == stream]
        assert ns == sorted(ns)


def test_a_message_that_cannot_be_stored_waits_in_the_error_store_and_is_resent(
    producer: Producer, sqlite_url: str
) -> None:
    with EventStore.open(sqlite_url) as store:
        producer.send([("good-1", b'{"order": 1}'), ("bad-1", b"not json"), ("odd-1", b"{}")])
        with Inbox("orders-in", store, order_received, producer.source()) as inbox:
            inbox.start()
            wait_for(lambda: producer.pending() == 0 and len(inbox.failures()) == 2, 30, "acks")
            failures = {f.message_id: f for f in inbox.failures()}
            assert stored_ids(store) == ["good-1"]
            assert set(failures) == {"bad-1", "odd-1"}
            assert failures["bad-1"].body == b"not json"
            assert failures["bad-1"].error.startswith("InvalidMessage: message 'bad-1'")
            assert failures["odd-1"].error == "InvalidMessage: not an order: {}"
            with pytest.raises(InvalidMessage):
                inbox.retry_failed("odd-1")
            assert {f.message_id: f.attempts for f in inbox.failures()}["odd-1"] == 2
            # The mapping is fixed: an operator's resend is stored by the running inbox.
            inbox.mapping = lambda m: Mapped("order-x", "OrderReceived", {"raw": m.body.decode()})
            from eventcraft.messaging import failed

            with inbox.database.transaction() as connection:
                assert failed.mark_resend(connection, "orders-in", "bad-1")
            wait_for(lambda: "bad-1" in stored_ids(store), 30, "the resent message")
            assert [f.message_id for f in inbox.failures()] == ["odd-1"]


def test_an_inbox_takes_messages_handed_to_it_once_each(sqlite_url: str) -> None:
    with (
        EventStore.open(sqlite_url) as store,
        Inbox("direct", store, order_received) as inbox,
    ):
        message = IncomingMessage("m-1", b'{"order": 3}')
        first = inbox.take(message)
        again = inbox.take(message)
        assert first is not None and first == again
        assert [e.stream_id for e in store.read_all()] == ["order-3"]
        assert inbox.take(IncomingMessage("", b"{}")) is None
        with pytest.raises(MessagingConfigError, match="has no source"):
            inbox.start()


def test_a_source_closed_by_its_inbox_and_again_by_its_owner_raises_nothing(
    producer: Producer, sqlite_url: str
) -> None:
    producer.send(orders(1))
    source = producer.source()
    with EventStore.open(sqlite_url) as store, Inbox("orders-in", store, order_received, source):
        pass
    source.close()  # failed before: the loop the source owned was closed already


@pytest.mark.slow
def test_an_inbox_killed_between_append_and_ack_stores_the_message_once(
    producer: Producer, pg_url: str, tmp_path: Path
) -> None:
    sent = orders(30)
    producer.send(sent)
    marker = tmp_path / "appended"
    trapped = PROCESSES.Process(
        target=take_in_until_killed, args=(pg_url, producer.spec, "msg-17", str(marker))
    )
    trapped.start()
    try:
        wait_for(marker.exists, 60, "the trapped append")
    finally:
        trapped.kill()
        trapped.join(10)
    with EventStore.open(pg_url) as store:
        assert "msg-17" in stored_ids(store)
    assert producer.pending() > 0  # msg-17 at least was never acknowledged
    worker = PROCESSES.Process(target=take_in_until_killed, args=(pg_url, producer.spec, None, ""))
    worker.start()
    try:
        with EventStore.open(pg_url) as store:
            wait_for(lambda: len(stored_ids(store)) >= len(sent), 60, "the second inbox")
            ids = stored_ids(store)
    finally:
        worker.kill()
        worker.join(10)
    assert sorted(ids) == sorted(m for m, _ in sent)


@pytest.mark.slow
def test_an_inbox_outlives_a_store_outage_and_stores_each_message_once(
    producer: Producer, pg_url: str
) -> None:
    proxy = TcpProxy("127.0.0.1", 5432)
    through_proxy = pg_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    sent = orders(60)
    try:
        with (
            EventStore.open(through_proxy) as store,
            Inbox("orders-in", store, order_received, producer.source(), batch_size=10) as inbox,
        ):
            producer.send(sent[:20])
            inbox.start()
            wait_for(lambda: inbox.stored >= 20, 30, "the first messages")
            proxy.cut()
            producer.send(sent[20:])
            wait_for(lambda: inbox.last_error is not None, 30, "the inbox to notice")
            proxy.restore()
            with EventStore.open(pg_url) as direct:
                # What was taken while the store was away was not acknowledged: it comes
                # again, and each message is stored once.
                wait_for(lambda: len(stored_ids(direct)) >= 60, 60, "the inbox to resume")
                assert sorted(stored_ids(direct)) == sorted(m for m, _ in sent)
    finally:
        proxy.close()
