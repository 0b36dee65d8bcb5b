"""What the shells take from messaging's face to operate it: the inboxes' error store
(`InboxErrorStore`) and every relay as its rows show it (`relay_records`), over the
projections' `checkpoint_leases`. (The shells' commands and pages over them:
test_error_store.py, test_commands.py, test_relays_lag_shown.py.)"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import (
    FAILED_TABLE,
    FailedMessageNotFound,
    InboxErrorStore,
    MessageDiscarded,
    RabbitMQPublisher,
    Relay,
    relay_records,
)
from eventcraft.projections import Database, checkpoint_leases

NOWHERE = "amqp://guest:guest@127.0.0.1:9/"
"""No broker: the relay here never has anything to publish."""


@contextmanager
def _database(store: EventStore) -> Iterator[Database]:
    """The store's own database, closed after."""
    database = Database.of(None, store)
    try:
        yield database
    finally:
        database.close()


def test_a_database_no_inbox_used_holds_no_error_store_and_gets_none(store: EventStore) -> None:
    with _database(store) as database:
        _gets_none(database)


def _gets_none(database: Database) -> None:
    errors = InboxErrorStore(database)
    assert errors.listed() == []
    with pytest.raises(FailedMessageNotFound, match="no failed message with id 'm-1'"):
        errors.find("orders-in", "m-1")
    with pytest.raises(FailedMessageNotFound):
        errors.resend("orders-in", "m-1")
    assert errors.forget("someone") is None
    with database.reading() as connection:
        assert not sa.inspect(connection).has_table(FAILED_TABLE)


def test_the_error_store_is_operated_through_its_face(with_failures: str) -> None:
    with EventStore.open(with_failures) as store, _database(store) as database:
        errors = InboxErrorStore(database)
        assert [m.message_id for m in errors.listed("orders-in")] == ["bad-1", "odd-1"]
        assert errors.find("orders-in", "odd-1").resend is False
        assert errors.resend("orders-in", "odd-1").resend is True
        discarded = errors.discard("orders-in", "bad-1", "spam")
        assert (discarded.body, discarded.discard_reason) == (b"", "spam")
        with pytest.raises(MessageDiscarded):
            errors.unsettled("orders-in", "bad-1")
        assert [m.message_id for m in errors.listed(discarded=True)] == ["bad-1"]
        assert errors.forget("nobody") == 0


def test_relay_records_show_each_relay_its_checkpoint_and_lag(store: EventStore) -> None:
    assert relay_records(store) == []
    with Relay("orders-out", store, RabbitMQPublisher(NOWHERE), categories=["order"]) as relay:
        relay.start()
        relay.stop()
    store.append("order-1", [NewEvent("Placed", {})])
    store.append("audit-1", [NewEvent("Seen", {})])
    [record] = relay_records(store)
    assert (record.name, record.state, record.position) == ("orders-out", "stopped", 0)
    assert (record.head, record.lag_events, record.lag_capped, record.owner) == (2, 1, False, None)


def test_checkpoint_leases_read_nothing_where_nothing_ran(store: EventStore) -> None:
    with _database(store) as database:
        assert checkpoint_leases(database, ["orders-out"]) == {}
        with Relay("orders-out", store, RabbitMQPublisher(NOWHERE)) as relay:
            relay.start()
            relay.stop()
        assert checkpoint_leases(database, ["orders-out", "other"]) == {"orders-out": (0, None)}
