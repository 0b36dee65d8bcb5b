"""Retrying a subscriber's parked event: claimed while its handler runs, never lost."""

from __future__ import annotations

import os
import signal
import threading
import time
from multiprocessing.connection import wait

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, RecordedEvent
from eventcraft.projections import (
    ErrorPolicy,
    ParkedEvent,
    ParkedEventNotFound,
    ProjectionRunner,
    Subscription,
    checkpoint,
    schema,
)
from eventcraft.projections.database import engine_for

from ..processes import PROCESSES
from ..waiting import until
from .models import notes
from .workers import retry_until_killed

SKIP = ErrorPolicy(attempts=1, backoff=0, then="skip")


def mailer(sent: list[int], failing: set[int], hold: threading.Event | None = None) -> Subscription:
    """Sends (records) each event's position; raises on the positions in `failing`, and
    with `hold` waits for it to be set before sending."""

    def send(event: RecordedEvent) -> None:
        if event.position in failing:
            raise ConnectionError("mail server down")
        if hold is not None:
            assert hold.wait(60), "the test never let the send go on"
        sent.append(event.position)

    return Subscription("mailer", send, on_error=SKIP)


def wait_out(claim: ParkedEvent) -> None:
    """Until a dead retrier's claim has lapsed: nobody renews it past `claimed_until`."""
    assert claim.claimed_until is not None
    pause = threading.Event()
    while time.time() <= claim.claimed_until:
        pause.wait(claim.claimed_until - time.time() + 0.001)


def test_a_retry_killed_inside_the_handler_leaves_the_event_parked_for_the_next(
    shared_store_url: str,
) -> None:
    """Under "skip" nothing else would ever deliver the event: the entry is all there is."""
    sent: list[int] = []
    with EventStore.open(shared_store_url) as store:
        first, bad, last = notes(store, "a", "bad", "c")
        failing = {bad}
        with ProjectionRunner(store, [mailer(sent, failing)]) as runner:
            runner.catch_up()
            inside, told = PROCESSES.Pipe(duplex=False)
            retrier = PROCESSES.Process(
                target=retry_until_killed, args=(shared_store_url, "mailer", bad, told)
            )
            retrier.start()
            try:
                ready = wait([inside, retrier.sentinel], timeout=120)
                assert inside in ready, f"the retrier died first ({retrier.exitcode})"
                assert inside.recv() == bad
            finally:
                os.kill(retrier.pid or 0, signal.SIGKILL)
                retrier.join()
            assert retrier.exitcode == -signal.SIGKILL
            (left,) = runner.parked("mailer")
            assert left.position == bad and left.claimed_by is not None
            wait_out(left)
            failing.clear()  # the mail server is back
            runner.retry_parked("mailer", bad)
            assert runner.parked("mailer") == []
    assert sent == [first, last, bad]


def test_a_retry_refuses_an_event_another_retry_has_in_hand(store: EventStore) -> None:
    """As when an operator's command line and the console retry one event, the first
    with a slow handler: its claim outlasts the lease by being renewed, and the second
    retry (or a discard) is refused until the first is done."""
    sent: list[int] = []
    first, bad, last = notes(store, "a", "bad", "c")
    failing = {bad}
    hold = threading.Event()
    hold.set()
    with (
        ProjectionRunner(store, [mailer(sent, failing, hold)], lease_ttl=0.3) as one,
        ProjectionRunner(store, [mailer(sent, set())]) as other,
    ):
        one.catch_up()
        failing.clear()
        hold.clear()
        outcome: list[BaseException | None] = []

        def retry() -> None:
            try:
                one.retry_parked("mailer", bad)
                outcome.append(None)
            except BaseException as error:
                outcome.append(error)

        retrying = threading.Thread(target=retry)
        retrying.start()
        try:
            until(lambda: one.parked("mailer")[0].claimed_by is not None, "the claim")
            (claimed,) = one.parked("mailer")
            assert str(claimed.claimed_by).startswith(one.owner)
            first_until = claimed.claimed_until or 0.0

            def renewed() -> bool:
                now_until = one.parked("mailer")[0].claimed_until or 0.0
                return time.time() > first_until and now_until > first_until

            until(renewed, "the claim to be renewed past its first term", seconds=60)
            for settle in (other.retry_parked, other.discard_parked):
                with pytest.raises(ParkedEventNotFound, match="being retried by"):
                    settle("mailer", bad)
        finally:
            hold.set()
            retrying.join(60)
        assert outcome == [None]
        assert other.parked("mailer") == []
    assert sent == [first, last, bad]


def test_a_retry_whose_handler_fails_gives_the_claim_back(store: EventStore) -> None:
    sent: list[int] = []
    first, bad, last = notes(store, "a", "bad", "c")
    with ProjectionRunner(store, [mailer(sent, {bad})]) as runner:
        runner.catch_up()
        before = runner.parked("mailer")
        with pytest.raises(ConnectionError):
            runner.retry_parked("mailer", bad)
        assert runner.parked("mailer") == before and before[0].claimed_by is None
    assert sent == [first, last]


earlier = sa.MetaData()
earlier_parked = sa.Table(
    schema.PARKED,
    earlier,
    sa.Column("projection", sa.Text, primary_key=True),
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("event_id", sa.Text, nullable=False),
    sa.Column("stream_id", sa.Text, nullable=False),
    sa.Column("version", sa.BigInteger, nullable=False),
    sa.Column("type", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=False),
    sa.Column("traceback", sa.Text, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("parked_at", sa.Float, nullable=False),
)
"""The error store as releases before the retry's claim made it."""


def test_an_error_store_made_by_an_earlier_release_gains_the_claim_when_opened(
    shared_store_url: str,
) -> None:
    sent: list[int] = []
    with EventStore.open(shared_store_url) as store:
        _, bad, last = notes(store, "a", "bad", "c")
        event = list(store.read_all())[1]
        engine = engine_for(shared_store_url)
        try:
            with engine.begin() as connection:
                # The mailer went past `bad` under "skip", and parked it.
                earlier.create_all(connection)
                schema.checkpoints.create(connection)
                checkpoint.insert(connection, "mailer", 1)
                checkpoint.advance(connection, "mailer", last)
                parked_at = time.time()
                connection.execute(
                    sa.insert(earlier_parked).values(
                        projection="mailer",
                        position=bad,
                        event_id=str(event.id),
                        stream_id=event.stream_id,
                        version=event.version,
                        type=event.type,
                        error="ConnectionError: mail server down",
                        traceback="Traceback ...",
                        attempts=1,
                        parked_at=parked_at,
                    )
                )
            with ProjectionRunner(store, [mailer(sent, set())]) as runner:
                (upgraded,) = runner.parked("mailer")
                assert upgraded == ParkedEvent(
                    "mailer", bad, str(event.id), "notebook-1", 2, "Note",
                    "ConnectionError: mail server down", "Traceback ...", 1, parked_at,
                    claimed_by=None, claimed_until=None,
                )  # fmt: skip
                runner.retry_parked("mailer", bad)
                assert runner.parked("mailer") == []
            with ProjectionRunner(store, [mailer(sent, set())]) as again:  # upgraded once
                again.catch_up()
                assert again.parked("mailer") == []
            columns = [c["name"] for c in sa.inspect(engine).get_columns(schema.PARKED)]
            assert columns[-2:] == ["claimed_by", "claimed_until"]
        finally:
            engine.dispose()
    assert sent == [bad]
