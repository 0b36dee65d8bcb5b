"""The incremental runner on every backend: catch up, follow, fail safely, report."""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent, UnsupportedStoreURL
from eventcraft.projections import (
    ErrorPolicy,
    ParkedEventNotFound,
    ProjectionRunner,
    ProjectionStopped,
    ProjectionTimeout,
    Subscription,
    UnknownProjection,
)

from .models import (
    append_history,
    applied_table,
    audit,
    balances,
    balances_table,
    flaky,
    notes,
    notes_table,
    rows,
)


def test_catching_up_applies_every_event_once(store: EventStore) -> None:
    last = append_history(store, accounts=3, per_account=5)
    with ProjectionRunner(store, [balances, audit], batch_size=4) as runner:
        runner.catch_up()
        with runner.database.reading() as connection:
            positions = Counter(row[0] for row in rows(connection, applied_table))
            table = rows(connection, balances_table)
        assert sorted(positions) == list(range(1, last + 1))
        assert set(positions.values()) == {1}
        expected: dict[str, tuple[int, int]] = {}
        for event in store.read_all():
            sign = {"Deposited": 1, "Withdrawn": -1}.get(event.type, 0)
            balance, moves = expected.get(event.stream_id, (0, 0))
            expected[event.stream_id] = (
                balance + sign * event.data.get("amount", 0),
                moves + abs(sign),
            )
        assert table == sorted((k, b, m) for k, (b, m) in expected.items())
        assert [s.position for s in runner.status()] == [last, last]


def test_a_following_runner_shows_new_events_to_wait_until(store: EventStore) -> None:
    with ProjectionRunner(store, [balances]) as runner:
        runner.start()
        for amount in (5, 7):
            position = store.append(
                "account-9", [NewEvent("Deposited", {"amount": amount})]
            ).positions[0]
            runner.wait_until(position, timeout=30)
        with runner.database.reading() as connection:
            assert rows(connection, balances_table) == [("account-9", 12, 2)]


def test_a_projection_passes_events_it_does_not_read(store: EventStore) -> None:
    store.append("account-1", [NewEvent("Deposited", {"amount": 1})])
    last = store.append(
        "other-1", [NewEvent("Unrelated", {})] * 1 + [NewEvent("Unrelated", {})]
    ).positions[-1]
    with ProjectionRunner(store, [balances]) as runner:
        runner.catch_up()
        runner.wait_until(last, timeout=5)
        (status,) = runner.status()
        assert (status.position, status.lag_events, status.lag_seconds) == (last, 0, 0.0)


def test_status_reports_lag_in_events_and_seconds(store: EventStore) -> None:
    with ProjectionRunner(store, [balances]) as runner:
        last = append_history(store, accounts=2, per_account=3)
        (status,) = runner.status()
        assert (status.position, status.head, status.lag_events) == (0, last, last)
        assert status.lag_seconds >= 0.0 and status.stopped_at is None and status.parked == 0


def test_wait_until_times_out_naming_the_laggards(store: EventStore) -> None:
    position = store.append("account-1", [NewEvent("Deposited", {"amount": 1})]).positions[0]
    with ProjectionRunner(store, [balances, audit]) as runner:
        runner.catch_up("audit")
        with pytest.raises(ProjectionTimeout, match="'balances' at 0") as raised:
            runner.wait_until(position, timeout=0.05)
        assert raised.value.behind == {"balances": 0}


def test_unknown_names_are_refused(store: EventStore) -> None:
    with (
        ProjectionRunner(store, [balances]) as runner,
        pytest.raises(UnknownProjection, match=r"'nope'.*balances"),
    ):
        runner.catch_up("nope")


def test_a_failing_event_under_skip_is_parked_and_the_rest_applied(store: EventStore) -> None:
    first, bad, last = notes(store, "a", "bad", "c")
    projection = flaky("skip", {"bad"})
    with ProjectionRunner(store, [projection], batch_size=10) as runner:
        runner.catch_up()
        with runner.database.reading() as connection:
            assert rows(connection, notes_table) == [(first, "a"), (last, "c")]
        (parked,) = runner.parked("notes-skip")
        assert (parked.position, parked.type, parked.attempts) == (bad, "Note", 3)
        assert parked.error == "ValueError: cannot take 'bad'" and "Traceback" in parked.traceback
        (status,) = runner.status()
        assert (status.position, status.parked, status.stopped_at) == (last, 1, None)


def test_a_failing_event_under_stop_halts_just_before_it(store: EventStore) -> None:
    first, bad, _ = notes(store, "a", "bad", "c")
    with ProjectionRunner(store, [flaky("stop", {"bad"})], batch_size=10) as runner:
        with pytest.raises(ProjectionStopped, match="stopped at position") as raised:
            runner.catch_up()
        assert raised.value.position == bad
        with runner.database.reading() as connection:
            assert rows(connection, notes_table) == [(first, "a")]
        (status,) = runner.status()
        assert (status.position, status.stopped_at) == (bad - 1, bad)


def test_a_stopped_projection_resumes_once_its_parked_event_is_retried(store: EventStore) -> None:
    first, bad, last = notes(store, "a", "bad", "c")
    broken = {"bad"}
    with ProjectionRunner(store, [flaky("stop", broken)]) as runner:
        with pytest.raises(ProjectionStopped):
            runner.catch_up()
        broken.clear()  # the fix is deployed
        runner.retry_parked("notes-stop", bad)
        runner.catch_up()
        with runner.database.reading() as connection:
            assert rows(connection, notes_table) == [(first, "a"), (bad, "bad"), (last, "c")]
        assert runner.parked("notes-stop") == []
        with pytest.raises(ParkedEventNotFound):
            runner.discard_parked("notes-stop", bad)


def test_a_discarded_event_is_never_applied(store: EventStore) -> None:
    first, bad, last = notes(store, "a", "bad", "c")
    with ProjectionRunner(store, [flaky("stop", {"bad"})]) as runner:
        with pytest.raises(ProjectionStopped):
            runner.catch_up()
        runner.discard_parked("notes-stop", bad)
        runner.catch_up()
        with runner.database.reading() as connection:
            assert rows(connection, notes_table) == [(first, "a"), (last, "c")]
        assert runner.parked("notes-stop") == []


def test_subscribers_get_each_event_once_in_order_filtered(store: EventStore) -> None:
    got: list[tuple[str, int]] = []
    lock = threading.Lock()

    def handler(name: str):  # type: ignore[no-untyped-def]
        def deliver(event: RecordedEvent) -> None:
            with lock:
                got.append((name, event.position))

        return deliver

    big = Subscription(
        "big", handler("big"), types=["Deposited"], where=lambda d: d["amount"] >= 10
    )
    accounts = Subscription("accounts", handler("accounts"), categories=["account"])
    positions = [
        store.append(stream, [NewEvent(kind, {"amount": amount})]).positions[0]
        for stream, kind, amount in [
            ("account-1", "Deposited", 5),
            ("account-1", "Deposited", 50),
            ("ledger-1", "Deposited", 70),
            ("account-2", "Withdrawn", 20),
        ]
    ]
    with ProjectionRunner(store, [big, accounts], batch_size=2) as runner:
        runner.start()
        runner.wait_until(positions[-1], timeout=30)
        runner.catch_up()
    assert [p for n, p in got if n == "big"] == [positions[1], positions[2]]
    assert [p for n, p in got if n == "accounts"] == [positions[0], positions[1], positions[3]]


def test_a_subscriber_that_keeps_failing_parks_the_event_and_skips_it(store: EventStore) -> None:
    got: list[int] = []

    def handler(event: RecordedEvent) -> None:
        if event.data["text"] == "bad":
            raise ConnectionError("mail server down")
        got.append(event.position)

    first, bad, last = notes(store, "a", "bad", "c")
    mailer = Subscription(
        "mailer", handler, on_error=ErrorPolicy(attempts=2, backoff=0, then="skip")
    )
    with ProjectionRunner(store, [mailer]) as runner:
        runner.catch_up()
        assert got == [first, last]
        assert [p.position for p in runner.parked("mailer")] == [bad]


def mailer_failing_on(texts: set[str], sent: list[int]) -> Subscription:
    """Sends (records) each note's position; raises on the texts in `texts`."""

    def send(event: RecordedEvent) -> None:
        if event.data["text"] in texts:
            raise ConnectionError("mail server down")
        sent.append(event.position)

    return Subscription("mailer", send, on_error=ErrorPolicy(attempts=1, backoff=0, then="skip"))


def test_retrying_a_subscriber_at_a_position_not_parked_delivers_nothing(
    store: EventStore,
) -> None:
    sent: list[int] = []
    first, bad, last = notes(store, "a", "bad", "c")
    with ProjectionRunner(store, [mailer_failing_on({"bad"}, sent)]) as runner:
        runner.catch_up()
        for position in (first, last, last + 1):
            with pytest.raises(ParkedEventNotFound, match=f"no event parked at {position}"):
                runner.retry_parked("mailer", position)
        assert sent == [first, last]
        assert [p.position for p in runner.parked("mailer")] == [bad]


def test_a_subscriber_retry_that_fails_again_keeps_the_event_parked(store: EventStore) -> None:
    sent: list[int] = []
    first, bad, last = notes(store, "a", "bad", "c")
    with ProjectionRunner(store, [mailer_failing_on({"bad"}, sent)]) as runner:
        runner.catch_up()
        before = runner.parked("mailer")
        with pytest.raises(ConnectionError):
            runner.retry_parked("mailer", bad)
        assert sent == [first, last]
        assert runner.parked("mailer") == before and before[0].position == bad


def test_a_subscriber_whose_handler_appends_to_the_store_can_be_retried(
    store: EventStore,
) -> None:
    """As a process manager's does: on SQLite the store and the read models share a file."""
    failing = {"bad"}

    def ship(event: RecordedEvent) -> None:
        if event.data["text"] in failing:
            raise ConnectionError("carrier down")
        store.append(f"shipment-{event.position}", [NewEvent("Shipped", {})])

    _, bad, _ = notes(store, "a", "bad", "c")
    shipper = Subscription(
        "shipper", ship, types=["Note"], on_error=ErrorPolicy(attempts=1, backoff=0, then="skip")
    )
    with ProjectionRunner(store, [shipper]) as runner:
        runner.catch_up()
        failing.clear()
        runner.retry_parked("shipper", bad)
        assert runner.parked("shipper") == []
    assert [e.type for e in store.read_stream(f"shipment-{bad}")] == ["Shipped"]


def test_two_retries_of_one_parked_event_deliver_it_once(store: EventStore) -> None:
    """As when an operator's command line and the console retry it at the same moment."""
    sent: list[int] = []
    failing = {"bad"}
    first, bad, last = notes(store, "a", "bad", "c")
    mailer = mailer_failing_on(failing, sent)
    with ProjectionRunner(store, [mailer]) as one, ProjectionRunner(store, [mailer]) as other:
        one.catch_up()
        failing.clear()  # the mail server is back
        together = threading.Barrier(2)
        outcomes: list[str] = []

        def retry(runner: ProjectionRunner) -> None:
            together.wait()
            try:
                runner.retry_parked("mailer", bad)
                outcomes.append("retried")
            except ParkedEventNotFound:
                outcomes.append("not found")

        threads = [threading.Thread(target=retry, args=(r,)) for r in (one, other)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(outcomes) == ["not found", "retried"]
        assert sent == [first, last, bad]
        assert one.parked("mailer") == []


def test_a_read_model_can_live_in_another_database(store: EventStore, tmp_path: Path) -> None:
    last = append_history(store, accounts=2, per_account=4)
    elsewhere = f"sqlite:///{tmp_path / 'read-models.db'}"
    with ProjectionRunner(store, [balances], database=elsewhere) as runner:
        runner.catch_up()
        assert runner.status()[0].position == last
    engine = sa.create_engine(elsewhere)
    with engine.connect() as connection:
        assert [row[0] for row in rows(connection, balances_table)] == ["account-0", "account-1"]
        names = sa.inspect(connection).get_table_names()
        assert "eventcraft_projections" in names and "eventcraft_events" not in names
    engine.dispose()


def test_a_read_model_url_with_an_unusable_schema_is_refused(store: EventStore) -> None:
    with pytest.raises(UnsupportedStoreURL, match="schema must be letters"):
        ProjectionRunner(store, [balances], database="postgresql://u@h/db?schema=x;drop")
