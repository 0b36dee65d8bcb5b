"""The relay publishes the log to RabbitMQ and NATS JetStream at least once, in log order."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import orjson
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import MessagingConfigError, Relay, relay_state
from eventcraft.messaging.loop import EventLoopThread
from eventcraft.projections import PartitionedRunner

from eventcraft.operations import messaging as messaging_operations

from ..processes import PROCESSES
from .brokers import (
    JetStreamReader,
    PrivateNats,
    Received,
    TcpProxy,
    check_nats,
    make_publisher,
    wait_for,
)
from .conftest import Target
from .workers import relay_forever


def placed(n: int, **metadata: str) -> NewEvent:
    return NewEvent("OrderPlaced", {"n": n}, metadata=dict(metadata))


def unique(messages: list[Received]) -> list[Received]:
    """What a consumer that de-duplicates by message id sees: each id once, first come."""
    seen: set[str] = set()
    kept = []
    for message in messages:
        if message.message_id not in seen:
            seen.add(message.message_id)
            kept.append(message)
    return kept


def test_a_relay_publishes_the_selected_events_with_their_ids_keys_and_headers(
    target: Target,
) -> None:
    with EventStore.open("memory://") as store:
        first = store.append("order-1", [placed(1, correlation_id="checkout-1")])
        store.append("payment-1", [NewEvent("PaymentTaken", {"n": 2})])
        store.append(
            "order-1",
            [
                NewEvent(
                    "OrderShipped",
                    {"n": 3, "skip": True},
                    metadata={"causation_id": "c-3"},
                )
            ],
        )
        traced = NewEvent(
            "OrderShipped",
            {"n": 4},
            metadata={
                "correlation_id": "checkout-2",
                "causation_id": "c-4",
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            },
        )
        store.append("order-2", [traced])
        with Relay(
            "out",
            store,
            target.publisher(),
            categories=["order"],
            where=lambda data: not data.get("skip"),
        ) as relay:
            relay.catch_up()
            status = relay.status()
        received = target.read(lambda got: len(got) >= 2, 20)
    assert [orjson.loads(m.body) for m in received] == [{"n": 1}, {"n": 4}]
    assert received[1].message_id == str(traced.id)
    key = received[1].key
    assert key.endswith("order.OrderShipped")
    headers = received[1].headers
    assert headers["eventcraft-stream"] == "order-2"
    assert headers["eventcraft-version"] == "1"
    assert headers["eventcraft-position"] == "4"
    assert headers["eventcraft-causation-id"] == "c-4"
    assert headers["traceparent"].startswith("00-4bf92f35")
    if target.kind == "rabbitmq":
        assert received[1].correlation_id == "checkout-2"
        assert received[0].persistent and received[1].persistent
    else:
        assert headers["Nats-Msg-Id"] == str(traced.id)
        assert headers["eventcraft-correlation-id"] == "checkout-2"
    assert first.positions == (1,)
    assert status.position == 4 and status.lag_events == 0 and status.published == 2
    assert status.state == "stopped" and status.owner is None


def test_a_restarted_relay_publishes_only_what_came_after_its_checkpoint(
    target: Target, sqlite_url: str
) -> None:
    with EventStore.open(sqlite_url) as store:
        store.append("order-1", [placed(n) for n in range(3)])
        with Relay("out", store, target.publisher()) as relay:
            relay.catch_up()
        store.append("order-1", [placed(n) for n in range(3, 5)])
        with Relay("out", store, target.publisher()) as relay:
            assert relay.status().position == 3
            relay.catch_up()
        received = target.read(lambda got: len(got) >= 5, 20)
    assert [orjson.loads(m.body)["n"] for m in received] == [0, 1, 2, 3, 4]


def test_a_relay_refuses_what_it_cannot_work_with(target: Target) -> None:
    with EventStore.open("memory://") as store:
        publisher = target.publisher()
        try:
            with pytest.raises(MessagingConfigError, match="batch_size must be an int >= 1"):
                Relay("out", store, publisher, batch_size=0)
            with pytest.raises(MessagingConfigError, match="through a Publisher"):
                Relay("out", store, object())  # type: ignore[arg-type]
        finally:
            publisher.close()


@pytest.mark.slow
def test_a_relay_killed_at_random_moments_delivers_every_event_in_order_per_stream(
    target: Target, pg_url: str
) -> None:
    streams = [f"order-{i}" for i in range(12)]
    chance = random.Random(22)
    writing = threading.Event()
    writing.set()
    written = [0]

    def write() -> None:
        # Appends go on while the relay is killed and restarted, so it dies mid-work.
        with EventStore.open(pg_url) as store:
            while writing.is_set():
                store.append(chance.choice(streams), [placed(0)])
                written[0] += 1
                time.sleep(0.002)

    with EventStore.open(pg_url) as store:
        for stream in streams:
            store.append(stream, [placed(0)])
    writer = threading.Thread(target=write)
    writer.start()
    try:
        # Six kills at least, and on until 500 events were written under them: a loaded
        # machine writes fewer a second, and the test counts events, not seconds.
        kills, deadline = 0, time.monotonic() + 180
        while (kills < 6 or written[0] < 500) and time.monotonic() < deadline:
            worker = PROCESSES.Process(target=relay_forever, args=(pg_url, target.spec, 20))
            worker.start()
            time.sleep(chance.uniform(0.8, 2.0))
            worker.kill()
            worker.join(10)
            kills += 1
    finally:
        writing.clear()
        writer.join(10)
    with EventStore.open(pg_url) as store:
        head = store.high_water_mark()
        events = {str(e.id): e for e in store.read_all()}
        worker = PROCESSES.Process(target=relay_forever, args=(pg_url, target.spec, 20))
        worker.start()
        try:
            with _checkpoint_reader(store, target) as relay:
                wait_for(lambda: relay.status().position >= head, 120, "the relay to the head")
        finally:
            worker.kill()
            worker.join(10)
    received = target.read(lambda got: {m.message_id for m in got} >= set(events), 60)
    seen = unique(received)
    assert {m.message_id for m in seen} == set(events)
    assert len(events) > 500
    # Log order, and therefore each stream's order, in what a de-duplicating consumer sees.
    positions = [events[m.message_id].position for m in seen]
    assert positions == sorted(positions)
    versions: dict[str, list[int]] = defaultdict(list)
    for m in seen:
        versions[events[m.message_id].stream_id].append(events[m.message_id].version)
    assert all(v == list(range(1, len(v) + 1)) for v in versions.values())
    if target.kind == "nats":
        # JetStream de-duplicated the batches published again by Nats-Msg-Id.
        assert len(received) == len(events)


class _checkpoint_reader:
    """A relay object of the same name that only reads its status (never steps)."""

    def __init__(self, store: EventStore, target: Target) -> None:
        self.relay = Relay("killed-relay", store, target.publisher())

    def __enter__(self) -> Relay:
        return self.relay

    def __exit__(self, *exc: object) -> None:
        self.relay.publisher.close()
        self.relay.database.close()


def _paused(relay: Relay) -> bool:
    return relay.status().state == "paused"


@pytest.mark.slow
def test_a_rabbitmq_outage_pauses_the_relay_and_it_resumes_with_nothing_lost(
    rabbitmq: Target, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow record of the relay's state widens the moment between it and the checkpoint's
    # move: other processes must find the relay running once its position moved on (they
    # found it paused when the record came after the move).
    write = relay_state.write

    def slow_write(connection: Any, state: relay_state.RelayState) -> None:
        if state.state == "running":
            time.sleep(0.3)
        write(connection, state)

    monkeypatch.setattr(relay_state, "write", slow_write)
    proxy = TcpProxy("127.0.0.1", 5672)
    url = rabbitmq.url.replace("127.0.0.1:5672", f"127.0.0.1:{proxy.port}")
    try:
        with EventStore.open(sqlite_url) as store:
            store.append("order-1", [placed(n) for n in range(50)])
            with Relay("out", store, rabbitmq.publisher(url), max_backoff=0.2) as relay:
                relay.start()
                wait_for(lambda: relay.status().position == 50, 20, "the first events")
                proxy.cut()
                store.append("order-1", [placed(n) for n in range(50, 100)])
                wait_for(lambda: _paused(relay), 20, "the relay to pause")
                status = relay.status()
                assert "RabbitMQ amqp://guest:***@127.0.0.1" in (status.last_error or "")
                assert status.position == 50 and status.lag_events == 50
                # Other processes see it too, through what the relay recorded.
                [seen] = messaging_operations.relays(store)
                assert (seen.state, seen.position, seen.lag_events) == ("paused", 50, 50)
                assert seen.last_error == status.last_error and seen.paused_since is not None
                proxy.restore()
                wait_for(lambda: relay.status().position == 100, 30, "the relay to resume")
                status = relay.status()
                assert messaging_operations.relays(store)[0].state == "running"
            assert messaging_operations.relays(store)[0].state == "stopped"
        received = rabbitmq.read(lambda got: len(unique(got)) >= 100, 30)
    finally:
        proxy.close()
    assert [orjson.loads(m.body)["n"] for m in unique(received)] == list(range(100))
    assert status.state == "running" and status.outages == 1 and status.last_error is None


@pytest.mark.slow
def test_a_nats_outage_pauses_the_relay_and_it_resumes_with_nothing_lost(
    tmp_path: Path, sqlite_url: str, loop: EventLoopThread
) -> None:
    check_nats(loop)
    server = PrivateNats(tmp_path / "nats")
    server.start()
    try:
        reader = JetStreamReader(loop, "OUTAGE", "outage", url=server.url)
        with EventStore.open(sqlite_url) as store:
            store.append("order-1", [placed(n) for n in range(50)])
            publisher = make_publisher("nats", server.url, "outage")
            with Relay("out", store, publisher, max_backoff=0.2) as relay:
                relay.start()
                wait_for(lambda: relay.status().position == 50, 20, "the first events")
                server.stop()
                store.append("order-1", [placed(n) for n in range(50, 100)])
                wait_for(lambda: _paused(relay), 20, "the relay to pause")
                assert relay.status().position == 50
                server.start()
                wait_for(lambda: relay.status().position == 100, 30, "the relay to resume")
                status = relay.status()
        received = reader.read(lambda got: len(got) >= 100, 30)
        assert [orjson.loads(m.body)["n"] for m in received] == list(range(100))
        assert status.outages == 1 and status.state == "running"
    finally:
        server.stop()


def test_a_relay_split_in_partitions_publishes_every_stream_in_order(
    rabbitmq: Target, sqlite_url: str
) -> None:
    with EventStore.open(sqlite_url) as store:
        for n in range(60):
            store.append(f"order-{n % 6}", [placed(n)])
        relays = Relay.partitioned("split", store, rabbitmq.publisher, partitions=3)
        try:
            with PartitionedRunner(store, "split", relays) as runner:
                while runner.step():
                    pass
                assert sorted(runner.held) == [f"split.p{i}of3" for i in range(3)]
            assert [r.status().position for r in relays] == [60, 60, 60]
        finally:
            for relay in relays:
                relay.close()
    received = rabbitmq.read(lambda got: len(got) >= 60, 20)
    assert len(received) == 60
    by_stream: dict[str, list[int]] = defaultdict(list)
    for m in received:
        by_stream[m.headers["eventcraft-stream"]].append(int(m.headers["eventcraft-version"]))
    assert by_stream == {f"order-{n}": list(range(1, 11)) for n in range(6)}
