"""Messaging on PostgreSQL and the local brokers: `python -m benchmarks.messaging`.

Three measures, each beside a reference in the same run:

- relay: `Relay.catch_up` of `--events` events to RabbitMQ and to NATS
  JetStream (read from the store, published in batches of 500 whose confirms
  are awaited together, checkpoint moved after each), beside a raw publisher
  loop on the same client with the same messages already in memory: once
  with the same batches of confirms, once waiting for each confirm in turn.
  Interleaved over `--rounds` rounds; each ratio is the median of the rounds.
- intake: an `Inbox` taking `--intake` messages off a RabbitMQ queue and a
  JetStream consumer into the store (one append per message, acked after it),
  and the `HttpIntake` under uvicorn (a process of its own) POSTed to by 8
  client threads, beside `EventStore.append` of the same events one by one.
- partitions: a subscription with a 2 ms handler over `--partition-events`
  events, split in 4 partitions, worked by 1, 2 and 4 processes: events/s and
  the speed-up over one process.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aio_pika
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.messaging import (
    HttpIntake,
    Inbox,
    IncomingMessage,
    JetStreamPublisher,
    JetStreamSource,
    Mapped,
    RabbitMQPublisher,
    RabbitMQSource,
    Relay,
)
from eventcraft.messaging.jetstream import connect
from eventcraft.messaging.loop import EventLoopThread
from eventcraft.messaging.messages import OutgoingMessage, outgoing
from eventcraft.projections import Database, PartitionedRunner, Subscription

from .contenders import PG, reset_schema

RABBITMQ = "amqp://guest:guest@127.0.0.1:5672/"
NATS = "nats://127.0.0.1:4222"
SCHEMA = "bench_messaging"
BATCH = 500


def url(schema: str = SCHEMA) -> str:
    return f"{PG}?schema={schema}"


def fill(store: EventStore, events: int) -> None:
    for start in range(0, events, 100):
        for n in range(start, min(start + 100, events)):
            store.append(
                f"order-{n % 1000}",
                [NewEvent("OrderPlaced", {"n": n, "sku": "A-1", "cents": n * 7 % 9000})],
            )


# --- relay -------------------------------------------------------------------


def relay_rate(store: EventStore, make: Callable[[], Any], events: int) -> float:
    name = f"bench-{uuid.uuid4().hex[:8]}"
    with Relay(name, store, make(), batch_size=BATCH) as relay:
        started = time.perf_counter()
        relay.catch_up()
        seconds = time.perf_counter() - started
        assert relay.status().position >= events
    with relay.database.transaction() as connection:
        connection.execute(
            sa.text("DELETE FROM eventcraft_projections WHERE name = :n"), {"n": name}
        )
    return events / seconds


def raw_rabbitmq(
    loop: EventLoopThread, exchange: str, messages: list[OutgoingMessage], batch: int
) -> float:
    async def run() -> float:
        connection = await aio_pika.connect(RABBITMQ)
        channel = await connection.channel(publisher_confirms=True)
        declared = await channel.declare_exchange(
            exchange, aio_pika.ExchangeType.TOPIC, durable=True
        )
        started = time.perf_counter()
        for start in range(0, len(messages), batch):
            await asyncio.gather(
                *(
                    declared.publish(
                        aio_pika.Message(
                            m.body,
                            delivery_mode=aio_pika.DeliveryMode.PERSISTENT,
                            message_id=m.message_id,
                            headers=dict(m.headers),
                        ),
                        routing_key=m.subject,
                        mandatory=False,
                    )
                    for m in messages[start : start + batch]
                )
            )
        seconds = time.perf_counter() - started
        await connection.close()
        return len(messages) / seconds

    return loop.run(run())


def raw_jetstream(
    loop: EventLoopThread, prefix: str, messages: list[OutgoingMessage], batch: int
) -> float:
    async def run() -> float:
        nc = await connect(NATS, 10)
        js = nc.jetstream()
        started = time.perf_counter()
        for start in range(0, len(messages), batch):
            await asyncio.gather(
                *(
                    js.publish(
                        f"{prefix}.{m.subject}",
                        m.body,
                        headers={"Nats-Msg-Id": f"raw-{uuid.uuid4()}", **m.headers},
                    )
                    for m in messages[start : start + batch]
                )
            )
        seconds = time.perf_counter() - started
        await nc.close()
        return len(messages) / seconds

    return loop.run(run())


def bench_relay(events: int, rounds: int) -> None:
    reset_schema(SCHEMA)
    loop = EventLoopThread("bench")
    exchange = f"bench-{uuid.uuid4().hex[:6]}"
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    stream = prefix.upper()

    async def setup() -> None:
        nc = await connect(NATS, 10)
        await nc.jetstream().add_stream(name=stream, subjects=[f"{prefix}.>"])
        await nc.close()

    loop.run(setup())
    results: dict[str, list[float]] = {}
    with EventStore.open(url()) as store:
        fill(store, events)
        messages = [outgoing(e) for e in store.read_all()]
        for _ in range(rounds):
            for kind in ("rabbitmq", "nats"):
                if kind == "rabbitmq":
                    ours = relay_rate(
                        store, lambda: RabbitMQPublisher(RABBITMQ, exchange=exchange), events
                    )
                    batched = raw_rabbitmq(loop, exchange, messages, BATCH)
                    single = raw_rabbitmq(loop, exchange, messages[: events // 5], 1)
                else:
                    ours = relay_rate(
                        store, lambda: JetStreamPublisher(NATS, prefix=prefix), events
                    )
                    batched = raw_jetstream(loop, prefix, messages, BATCH)
                    single = raw_jetstream(loop, prefix, messages[: events // 5], 1)
                for label, value in (
                    ("relay", ours),
                    ("raw batched", batched),
                    ("raw 1 by 1", single),
                ):
                    results.setdefault(f"{kind} {label}", []).append(value)
                results.setdefault(f"{kind} relay/raw batched", []).append(ours / batched)
                results.setdefault(f"{kind} relay/raw 1 by 1", []).append(ours / single)

    async def teardown() -> None:
        nc = await connect(NATS, 10)
        await nc.jetstream().delete_stream(stream)
        await nc.close()
        connection = await aio_pika.connect(RABBITMQ)
        channel = await connection.channel()
        await channel.exchange_delete(exchange)
        await connection.close()

    loop.run(teardown())
    loop.close()
    print(f"relay of {events} events, {rounds} rounds (events/s: median of rounds)")
    for key, values in results.items():
        shown = (
            f"{statistics.median(values):.2f}"
            if "/" in key
            else f"{statistics.median(values):,.0f}"
        )
        print(f"  {key:28} {shown}")


# --- intake ------------------------------------------------------------------


def order(message: IncomingMessage) -> Mapped:
    body = message.json()
    return Mapped(f"order-{body['n'] % 1000}", "OrderReceived", body)


def bench_intake(count: int) -> None:
    loop = EventLoopThread("bench-intake")
    queue = f"bench-intake-{uuid.uuid4().hex[:6]}"
    prefix = f"benchin{uuid.uuid4().hex[:6]}"
    stream = prefix.upper()
    bodies = [(f"m-{n}", f'{{"n": {n}, "sku": "A-1"}}'.encode()) for n in range(count)]

    async def produce() -> None:
        connection = await aio_pika.connect(RABBITMQ)
        channel = await connection.channel(publisher_confirms=True)
        await channel.declare_queue(queue, durable=True)
        for start in range(0, count, BATCH):
            await asyncio.gather(
                *(
                    channel.default_exchange.publish(
                        aio_pika.Message(b, message_id=i), routing_key=queue
                    )
                    for i, b in bodies[start : start + BATCH]
                )
            )
        await connection.close()
        nc = await connect(NATS, 10)
        js = nc.jetstream()
        await js.add_stream(name=stream, subjects=[f"{prefix}.>"])
        for start in range(0, count, BATCH):
            await asyncio.gather(
                *(
                    js.publish(f"{prefix}.orders", b, headers={"Nats-Msg-Id": i})
                    for i, b in bodies[start : start + BATCH]
                )
            )
        await nc.close()

    loop.run(produce())
    rates: dict[str, float] = {}
    for label, source in (
        ("inbox from RabbitMQ", RabbitMQSource(RABBITMQ, queue=queue)),
        ("inbox from JetStream", JetStreamSource(NATS, stream=stream, durable="bench")),
    ):
        reset_schema(SCHEMA)
        with (
            EventStore.open(url()) as store,
            Inbox("bench-in", store, order, source, batch_size=BATCH) as inbox,
        ):
            started = time.perf_counter()
            while inbox.stored < count:
                inbox.step(timeout=1.0)
            rates[label] = count / (time.perf_counter() - started)
    rates["HTTP intake, 8 clients"] = bench_http_intake(count, 8)
    reset_schema(SCHEMA)
    with EventStore.open(url()) as store:
        started = time.perf_counter()
        for i, b in bodies:
            m = order(IncomingMessage(i, b))
            store.append(m.stream_id, [NewEvent(m.type, m.data, {"message_id": i})])
        rates["raw append, one by one"] = count / (time.perf_counter() - started)

    async def teardown() -> None:
        connection = await aio_pika.connect(RABBITMQ)
        channel = await connection.channel()
        await channel.queue_delete(queue)
        await connection.close()
        nc = await connect(NATS, 10)
        await nc.jetstream().delete_stream(stream)
        await nc.close()

    loop.run(teardown())
    loop.close()
    print(f"intake of {count} messages (events/s)")
    floor = rates["raw append, one by one"]
    for key, value in rates.items():
        print(f"  {key:28} {value:,.0f}   ({value / floor:.2f} of raw append)")


def intake_app() -> HttpIntake:
    """The benchmark's HTTP intake, for `uvicorn --factory` in a process of its own."""
    store = EventStore.open(os.environ["BENCH_INTAKE_STORE"])
    return HttpIntake(Inbox("bench-http", store, order))


def bench_http_intake(count: int, clients: int) -> float:
    reset_schema(SCHEMA)
    port = 8799
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "--factory", "benchmarks.messaging:intake_app"),
            *("--port", str(port), "--log-level", "warning", "--no-access-log"),
        ],
        env={**os.environ, "BENCH_INTAKE_STORE": url()},
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

        def post(first: int) -> None:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            for n in range(first, count, clients):
                connection.request(
                    "POST",
                    "/orders",
                    body=f'{{"n": {n}, "sku": "A-1"}}'.encode(),
                    headers={"Idempotency-Key": f"m-{n}", "Content-Type": "application/json"},
                )
                response = connection.getresponse()
                response.read()
                assert response.status == 202, response.status
            connection.close()

        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(post, range(clients)))
        return count / (time.perf_counter() - started)
    finally:
        server.terminate()
        server.wait(10)


# --- partitions --------------------------------------------------------------


def work(store_url: str, go: Any, pause: float) -> None:
    def handle(event: RecordedEvent) -> None:
        time.sleep(pause)

    with (
        EventStore.open(store_url) as store,
        PartitionedRunner.for_subscription(
            store,
            Subscription("bench-partitions", handle),
            partitions=4,
            batch_size=100,
            lease_ttl=5.0,
        ) as runner,
    ):
        go.wait()
        runner.run()


def bench_partitions(events: int, pause: float) -> None:
    reset_schema(SCHEMA)
    with EventStore.open(url()) as store:
        fill(store, events)
        head = store.high_water_mark()
    spawn = multiprocessing.get_context("spawn")
    rates: dict[int, float] = {}
    for processes in (1, 2, 4):
        go = spawn.Event()
        workers = [spawn.Process(target=work, args=(url(), go, pause)) for _ in range(processes)]
        # Each run's checkpoints start from zero.
        with EventStore.open(url()) as store:
            database = Database.of(None, store)
            with database.transaction() as connection:
                if sa.inspect(connection).has_table("eventcraft_projections"):
                    connection.execute(
                        sa.text(
                            "DELETE FROM eventcraft_projections WHERE name LIKE 'bench-partitions%'"
                        )
                    )
                    connection.execute(sa.text("DELETE FROM eventcraft_partition_members"))
            for worker in workers:
                worker.start()
            time.sleep(3)  # the processes import and connect before the clock starts
            started = time.perf_counter()
            go.set()
            while True:
                time.sleep(0.2)
                with database.reading() as connection:
                    positions = (
                        connection.execute(
                            sa.text(
                                "SELECT position FROM eventcraft_projections "
                                "WHERE name LIKE 'bench-partitions%'"
                            )
                        )
                        .scalars()
                        .all()
                    )
                if len(positions) == 4 and min(positions) >= head:
                    break
            seconds = time.perf_counter() - started
            database.close()
        for worker in workers:
            worker.kill()
            worker.join()
        rates[processes] = events / seconds
        print(
            f"  {processes} process(es): {rates[processes]:,.0f} events/s ({seconds:.1f} s)",
            flush=True,
        )
    print(f"partitions: {events} events, {pause * 1000:.0f} ms handler, 4 partitions")
    for processes, rate in rates.items():
        print(f"  {processes} process(es) {rate:10,.0f} events/s   speed-up {rate / rates[1]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--intake", type=int, default=10_000)
    parser.add_argument("--partition-events", type=int, default=100_000)
    parser.add_argument("--pause", type=float, default=0.002)
    parser.add_argument("--only", choices=["relay", "intake", "partitions"])
    arguments = parser.parse_args()
    if arguments.only in (None, "relay"):
        bench_relay(arguments.events, arguments.rounds)
    if arguments.only in (None, "intake"):
        bench_intake(arguments.intake)
    if arguments.only in (None, "partitions"):
        bench_partitions(arguments.partition_events, arguments.pause)


if __name__ == "__main__":
    main()
