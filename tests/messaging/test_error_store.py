"""The inboxes' error store settles a message by discarding it: what it said is erased, and
its record (when, why, its error's type) stays, listed apart from the messages still
waiting."""

from __future__ import annotations

import time

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore
from eventcraft.messaging import Inbox, IncomingMessage, MessageDiscarded, failed
from eventcraft.projections import Database

from eventcraft.operations import messaging as operations
from eventcraft.operations.errors import NotFound, Problems

from .workers import order_received


def test_a_discarded_message_is_erased_and_its_record_kept_with_when_and_why_apart(
    with_failures: str,
) -> None:
    with EventStore.open(with_failures) as store:
        before = time.time()
        settled = operations.discard(store, "orders-in", "bad-1", "a test order from the shop")
        assert settled.discarded_at is not None and settled.discarded_at.timestamp() >= before
        assert settled.discard_reason == "a test order from the shop"
        assert [f.message_id for f in operations.failed(store)] == ["odd-1"]
        [kept] = operations.failed(store, "orders-in", discarded=True)
        # What the message said is gone (it may be personal data); its record stays.
        assert (kept.message_id, kept.body, kept.headers) == ("bad-1", "", {})
        assert kept.error == "InvalidMessage: <discarded>" and "not json" not in kept.traceback
        assert kept == operations.failed_message(store, "orders-in", "bad-1") == settled
        # A discard without a reason says so by none.
        assert operations.discard(store, "orders-in", "odd-1").discard_reason is None
        assert operations.failed(store) == []
        assert len(operations.failed(store, discarded=True)) == 2


def test_a_discarded_message_is_not_resent_or_discarded_again(with_failures: str) -> None:
    with EventStore.open(with_failures) as store:
        operations.discard(store, "orders-in", "bad-1", "spam")
        refusal = r"'bad-1' of inbox 'orders-in' was discarded at .* UTC \(spam\): it is settled"
        for settle in (operations.to_settle, operations.resend, operations.discard):
            with pytest.raises(Problems, match=refusal):
                settle(store, "orders-in", "bad-1")
        with pytest.raises(NotFound, match="no failed message with id 'nope'"):
            operations.discard(store, "orders-in", "nope")
        with Inbox("orders-in", store, order_received) as inbox:
            with pytest.raises(MessageDiscarded):
                inbox.retry_failed("bad-1")
            assert [f.message_id for f in inbox.failures()] == ["odd-1"]
        [kept] = operations.failed(store, discarded=True)
        assert (kept.resend, kept.discard_reason, kept.attempts) == (False, "spam", 1)


def test_a_discard_cancels_a_resend_the_inbox_has_not_done_yet(with_failures: str) -> None:
    with EventStore.open(with_failures) as store:
        operations.resend(store, "orders-in", "odd-1")
        operations.discard(store, "orders-in", "odd-1")
        with Inbox("orders-in", store, order_received) as inbox:
            inbox.take_resends()
        assert operations.failed_message(store, "orders-in", "odd-1").resend is False
        assert [e.metadata["message_id"] for e in store.read_all()] == ["good-1"]


def test_a_discarded_message_that_fails_again_waits_again_with_its_attempts_counted_on(
    with_failures: str,
) -> None:
    """Its sender delivered it again: the discard was about the message as it was, and the
    new failure is for an operator to look at."""
    with EventStore.open(with_failures) as store:
        operations.discard(store, "orders-in", "odd-1", "empty")
        with Inbox("orders-in", store, order_received) as inbox:
            assert inbox.take(IncomingMessage("odd-1", b"{}", subject="orders")) is None
        again = operations.failed_message(store, "orders-in", "odd-1")
        assert (again.attempts, again.discarded_at, again.discard_reason) == (2, None, None)
        assert [f.message_id for f in operations.failed(store)] == ["bad-1", "odd-1"]
        assert operations.failed(store, discarded=True) == []
        assert operations.discard(store, "orders-in", "odd-1").discarded_at is not None


OLD_TABLE = sa.Table(
    failed.FAILED,
    sa.MetaData(),
    sa.Column("inbox", sa.Text, primary_key=True),
    sa.Column("message_id", sa.Text, primary_key=True),
    sa.Column("subject", sa.Text, nullable=False),
    sa.Column("body", sa.LargeBinary, nullable=False),
    sa.Column("headers", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("traceback", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("failed_at", sa.Float, nullable=False),
    sa.Column("resend", sa.Boolean, nullable=False),
)
"""The error store as the release before discards were kept made it."""


@pytest.mark.parametrize("opened_by", ["inbox", "operations"])
def test_an_error_store_an_earlier_release_made_is_upgraded_when_opened(
    shared_store_url: str, opened_by: str
) -> None:
    with EventStore.open(shared_store_url) as store:
        database = Database.of(None, store)
        try:
            with database.transaction() as connection:
                OLD_TABLE.create(connection)
                connection.execute(
                    sa.insert(OLD_TABLE).values(
                        inbox="orders-in",
                        message_id="old-1",
                        subject="orders",
                        body=b"not json",
                        headers="{}",
                        error="InvalidMessage: old",
                        traceback="Traceback ...",
                        attempts=3,
                        failed_at=time.time(),
                        resend=False,
                    )
                )
            if opened_by == "inbox":
                Inbox("orders-in", store, order_received).close()
            [waiting] = operations.failed(store)
            assert (waiting.message_id, waiting.attempts, waiting.discarded_at) == (
                "old-1",
                3,
                None,
            )
            with database.reading() as connection:
                columns = {c["name"] for c in sa.inspect(connection).get_columns(failed.FAILED)}
            assert {"discarded_at", "discard_reason"} <= columns
            operations.discard(store, "orders-in", "old-1", "from before the upgrade")
            assert [f.discard_reason for f in operations.failed(store, discarded=True)] == [
                "from before the upgrade"
            ]
        finally:
            database.close()
