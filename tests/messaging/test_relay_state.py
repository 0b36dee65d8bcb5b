"""Every way of running a relay records its state for other processes (`relay_records`,
`eventcraft messaging relays`, the console), when it changes and not per batch:
`catch_up()` and `step()` (a partitioned runner's) as `start()` and `run()` do."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import OutgoingMessage, Publisher, Relay, relay_records
from eventcraft.projections import Database, PartitionedRunner


class Watching(Publisher):
    """Takes every message, and notes what `relay_records` says while it publishes."""

    broker = "watching"

    def __init__(self, store: EventStore) -> None:
        self.store = store
        self.seen: list[tuple[str, str]] = []

    def publish(self, messages: Sequence[OutgoingMessage]) -> None:
        self.seen += [(r.name, r.state) for r in relay_records(self.store)]

    def close(self) -> None:
        pass


def shown(store: EventStore) -> list[tuple[str, str, int, int]]:
    return [(r.name, r.state, r.position, r.lag_events) for r in relay_records(store)]


def placed(store: EventStore, count: int) -> None:
    for n in range(count):
        store.append(f"order-{n}", [NewEvent("OrderPlaced", {"n": n})])


@contextmanager
def state_writes(database: Database) -> Iterator[list[str]]:
    """The writes of the relays' state table as the database runs them: each is one UPDATE
    of the relay's row (followed by an INSERT the first time, when it updated none)."""
    written: list[str] = []

    def seen(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE EVENTCRAFT_RELAYS"):
            written.append(statement)

    sa.event.listen(database.engine, "before_cursor_execute", seen)
    try:
        yield written
    finally:
        sa.event.remove(database.engine, "before_cursor_execute", seen)


def test_a_relay_run_by_catch_up_is_listed_running_while_it_publishes_then_stopped(
    shared_store_url: str,
) -> None:
    with EventStore.open(shared_store_url) as store:
        publisher = Watching(store)
        with Relay("orders-out", store, publisher) as relay:
            relay.catch_up()  # nothing to publish yet: listed all the same
            assert shown(store) == [("orders-out", "stopped", 0, 0)]
            placed(store, 3)
            relay.catch_up()
            assert publisher.seen == [("orders-out", "running")]
            assert shown(store) == [("orders-out", "stopped", 3, 0)]
            assert relay.status().state == "stopped"


def test_a_relay_stepped_by_a_partitioned_runner_is_listed_running_until_it_stops(
    shared_store_url: str,
) -> None:
    with EventStore.open(shared_store_url) as store:
        placed(store, 4)
        relays = Relay.partitioned("split", store, lambda: Watching(store), partitions=2)
        try:
            with PartitionedRunner(store, "split", relays) as runner:
                while runner.step():
                    pass
                assert shown(store) == [
                    ("split.p0of2", "running", 4, 0),
                    ("split.p1of2", "running", 4, 0),
                ]
                assert [r.status().state for r in relays] == ["running", "running"]
            assert [r.state for r in relay_records(store)] == ["stopped", "stopped"]
        finally:
            for relay in relays:
                relay.close()


def test_a_relay_records_its_state_when_it_changes_not_per_batch(shared_store_url: str) -> None:
    with EventStore.open(shared_store_url) as store:
        placed(store, 10)
        database = Database.of(None, store)
        try:
            with (
                Relay(
                    "orders-out", store, Watching(store), database=database, batch_size=1
                ) as relay,
                state_writes(database) as written,
            ):
                relay.catch_up()  # ten batches
                assert relay.position == 10
                assert len(written) == 2  # running before the first, stopped after the last
                relay.catch_up()  # nothing to publish
                for _ in range(3):
                    relay.step()
                assert len(written) == 3  # running once more, while it is stepped
                relay.release()
                assert len(written) == 4
        finally:
            database.close()
