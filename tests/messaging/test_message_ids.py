"""A message id belongs to its inbox: the event id is derived from the inbox's name and
the message id, and a message stored before ids were scoped is still found by its retry."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import Inbox, IncomingMessage, Mapped, event_id_for

from .unscoped import stored_unscoped
from .workers import order_received


def into(stream: str) -> Mapped:
    return Mapped(stream, "OrderReceived", {"order": 1})


@pytest.fixture
def sql_store(shared_store_url: str) -> Iterator[EventStore]:
    with EventStore.open(shared_store_url) as store:
        yield store


@pytest.mark.parametrize("streams", [("shop-1", "market-1"), ("order-1", "order-1")])
def test_two_inboxes_each_store_a_message_id_they_both_take(
    sql_store: EventStore, streams: tuple[str, str]
) -> None:
    message = IncomingMessage("m-1", b'{"order": 1}')
    with (
        Inbox("shop-in", sql_store, lambda _: into(streams[0])) as shop,
        Inbox("market-in", sql_store, lambda _: into(streams[1])) as market,
    ):
        assert shop.take(message) is not None
        assert market.take(message) is not None
        assert shop.take(message) is not None  # a redelivery: stored once still
        assert shop.failures() == [] and market.failures() == []
    shop_id, market_id = event_id_for("shop-in", "m-1"), event_id_for("market-in", "m-1")
    assert shop_id != market_id
    assert [e.id for e in sql_store.read_all()] == [shop_id, market_id]


def test_an_event_id_is_derived_from_the_inbox_and_the_message_id_even_a_uuid() -> None:
    key = str(uuid.uuid4())
    assert event_id_for("orders-in", key) == event_id_for("orders-in", key)
    assert event_id_for("orders-in", key) != uuid.UUID(key)
    assert event_id_for("a", "b c") != event_id_for("a b", "c")


# The uuid's test id is fixed: every pytest-xdist worker must collect the same tests.
@pytest.mark.parametrize("message_id", ["m-1", pytest.param(str(uuid.uuid4()), id="uuid")])
def test_a_message_stored_before_ids_were_scoped_is_not_stored_again(
    sql_store: EventStore, message_id: str
) -> None:
    body = b'{"order": 1}'
    earlier = stored_unscoped(sql_store, message_id, body, "order-1")
    with Inbox("orders-in", sql_store, order_received) as inbox:
        result = inbox.take(IncomingMessage(message_id, body))
        assert result is not None and result.positions == (1,)
        found = inbox.stored_event(message_id)
        assert found is not None and found.id == earlier
    assert [e.id for e in sql_store.read_all()] == [earlier]


def test_an_inbox_told_no_messages_predate_scoped_ids_does_not_look_for_them(
    sql_store: EventStore,
) -> None:
    body = b'{"order": 1}'
    stored_unscoped(sql_store, "m-1", body, "order-1")
    with Inbox("orders-in", sql_store, order_received, unscoped_ids=False) as inbox:
        assert inbox.take(IncomingMessage("m-1", body)) is not None
        assert inbox.stored_event("m-1") is not None
    assert len(list(sql_store.read_all())) == 2


def test_an_unrelated_event_under_a_uuid_message_id_is_not_taken_for_the_message(
    sql_store: EventStore,
) -> None:
    other = uuid.uuid4()
    sql_store.append("payroll-ann", [NewEvent("SalaryPaid", {"cents": 1}, id=other)])
    with Inbox("orders-in", sql_store, order_received) as inbox:
        assert inbox.stored_event(str(other)) is None
        assert inbox.take(IncomingMessage(str(other), b'{"order": 1}')) is not None
    assert [e.stream_id for e in sql_store.read_all()] == ["payroll-ann", "order-1"]
