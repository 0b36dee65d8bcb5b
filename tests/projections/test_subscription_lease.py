"""A subscriber's handler that outlasts the lease keeps it: no other process delivers
meanwhile, each event is delivered in log order, and a lease lost all the same ends the
batch when the handler returns, for the new holder to deliver again (at least once)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import AsyncEventStore, EventStore, RecordedEvent
from eventcraft.projections import (
    AsyncProjectionRunner,
    ProjectionRunner,
    Subscription,
    checkpoint,
    schema,
)
from eventcraft.projections.competing import PartitionedRunner, members
from eventcraft.projections.database import Database

from ..processes import PROCESSES
from ..waiting import until
from .models import notes

TTL = 0.5
NAME = "mailer"
KEPT = 4 * TTL
"""How far past the other process's start the lease must be renewed to count as kept:
that process has looked for it several times by then (a runner looks every 0.5 s)."""


def follow_beside(url: str, ready: Any, stop: Any, sent: str) -> None:
    """A second process following the subscription under its own owner name, each
    delivered position appended to the file `sent`. (Spawned: module level.)"""

    def send(event: RecordedEvent) -> None:
        with open(sent, "a") as file:
            file.write(f"{event.position}\n")

    with (
        EventStore.open(url) as store,
        ProjectionRunner(store, [Subscription(NAME, send)], lease_ttl=TTL) as runner,
    ):
        runner.start()
        ready.set()
        stop.wait(120)


class Beside:
    """The second process, started and stopped by a `with` block."""

    def __init__(self, url: str, folder: Path) -> None:
        self.path = folder / "sent-beside"
        self.path.touch()
        self.ready, self.stop = PROCESSES.Event(), PROCESSES.Event()
        self.process = PROCESSES.Process(
            target=follow_beside, args=(url, self.ready, self.stop, str(self.path))
        )

    def sent(self) -> list[int]:
        return [int(line) for line in self.path.read_text().split()]

    def __enter__(self) -> Beside:
        self.process.start()
        until(lambda: self.ready.is_set() or not self.process.is_alive(), "the other process", 120)
        assert self.ready.is_set(), f"the other process died ({self.process.exitcode})"
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop.set()
        self.process.join(60)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        assert exc is not None or self.process.exitcode == 0


@contextlib.contextmanager
def released(hold: threading.Event | asyncio.Event) -> Iterator[None]:
    """Lets a held handler go on when the block ends, a failed one too, so that its
    runner stops."""
    try:
        yield
    finally:
        hold.set()


def lease(database: Database, name: str = NAME) -> checkpoint.Checkpoint:
    with database.reading() as connection:
        row = checkpoint.read(connection, name)
    assert row is not None
    return row


def held_throughout(database: Database, owner: str, beside: Beside) -> None:
    """While our handler is held: the lease stays ours, renewed well past the other
    process's start, and that process delivers nothing."""
    since = time.time()

    def kept_or_taken() -> bool:
        row = lease(database)
        return row.owner != owner or (row.lease_until or 0.0) > since + KEPT

    until(kept_or_taken, "the lease to be kept or taken")
    row = lease(database)
    if row.owner != owner:
        with contextlib.suppress(AssertionError):  # to say what it delivered, if anything
            until(lambda: beside.sent() != [], "the other process's deliveries", 5)
    assert row.owner == owner, (
        f"the lease passed to {row.owner} while our handler ran; "
        f"that process delivered {beside.sent()} meanwhile"
    )
    assert beside.sent() == []


def handed_over(store: EventStore, database: Database, owner: str, beside: Beside) -> int:
    """Once we gave the lease up, the other process takes it and delivers from our
    checkpoint on: an event appended now is the first it delivers."""
    until(lambda: lease(database).owner not in (None, owner), "the other process's lease")
    (after,) = notes(store, "after")
    until(lambda: beside.sent() == [after] or len(beside.sent()) > 1, "its delivery", 60)
    return after


@pytest.mark.slow
def test_a_handler_that_outlasts_the_lease_keeps_another_process_from_delivering(
    shared_store_url: str, tmp_path: Path
) -> None:
    sent: list[int] = []
    inside, hold = threading.Event(), threading.Event()

    def send(event: RecordedEvent) -> None:
        sent.append(event.position)
        if len(sent) == 1:
            inside.set()
            assert hold.wait(60), "the test never let the handler go on"

    with EventStore.open(shared_store_url) as store:
        first, second, third = notes(store, "a", "b", "c")
        with ProjectionRunner(store, [Subscription(NAME, send)], lease_ttl=TTL) as runner:
            runner.start()
            until(inside.is_set, "the first delivery")
            with Beside(shared_store_url, tmp_path) as beside, released(hold):
                held_throughout(runner.database, runner.owner, beside)
                hold.set()
                runner.wait_until(third)
                assert sent == [first, second, third]
                runner.stop()
                after = handed_over(store, runner.database, runner.owner, beside)
                assert beside.sent() == [after]
        assert sent == [first, second, third]
        assert runner.fenced() == {NAME: 0}


@pytest.mark.slow
def test_an_awaited_handler_that_outlasts_the_lease_keeps_it_too(
    shared_store_url: str, tmp_path: Path
) -> None:
    """The async runner delivers through the same projector: the same keeper holds."""
    sent: list[int] = []

    async def test(store: AsyncEventStore, blocking: EventStore) -> None:
        inside, hold = asyncio.Event(), asyncio.Event()

        async def send(event: RecordedEvent) -> None:
            sent.append(event.position)
            if len(sent) == 1:
                inside.set()
                await hold.wait()

        first, second, third = await asyncio.to_thread(notes, blocking, "a", "b", "c")
        runner = await AsyncProjectionRunner.open(store, [Subscription(NAME, send)], lease_ttl=TTL)
        async with runner:
            following = asyncio.create_task(runner.run())
            await asyncio.wait_for(inside.wait(), 30)
            database, owner = runner.runner.database, runner.runner.owner
            with Beside(shared_store_url, tmp_path) as beside, released(hold):
                await asyncio.to_thread(held_throughout, database, owner, beside)
                hold.set()
                await runner.wait_until(third)
                assert sent == [first, second, third]
                following.cancel()
                await asyncio.gather(following, return_exceptions=True)
                after = await asyncio.to_thread(handed_over, blocking, database, owner, beside)
                assert beside.sent() == [after]

    async def main() -> None:
        with EventStore.open(shared_store_url) as blocking:
            async with await AsyncEventStore.open(shared_store_url) as store:
                await asyncio.wait_for(test(store, blocking), 120)

    asyncio.run(main())
    assert len(sent) == 3


def test_a_lease_taken_during_a_delivery_ends_the_batch_when_the_handler_returns(
    store: EventStore, caplog: pytest.LogCaptureFixture
) -> None:
    """As when a process whose clock runs ahead takes it: nothing more is delivered or
    checkpointed, and the next holder delivers that event again, then the rest in order."""
    caplog.set_level(logging.WARNING, logger="eventcraft.projections")
    sent: list[int] = []
    inside, hold = threading.Event(), threading.Event()

    def send(event: RecordedEvent) -> None:
        sent.append(event.position)
        if not hold.is_set():
            inside.set()
            assert hold.wait(60), "the test never let the handler go on"

    first, second, third = notes(store, "a", "b", "c")
    with (
        ProjectionRunner(store, [Subscription(NAME, send)], lease_ttl=TTL) as runner,
        released(hold),
    ):
        runner.start()
        until(inside.is_set, "the first delivery")
        row = schema.checkpoints.c
        with runner.database.transaction() as connection:
            connection.execute(
                sa.update(schema.checkpoints)
                .where(row.name == NAME)
                .values(owner="ahead", lease_until=time.time() + 60)
            )
        until(lambda: "took its lease" in caplog.text, "the keeper to find the lease taken", 10)
        hold.set()
        until(lambda: runner.fenced() == {NAME: 1}, "the batch to end")
        assert sent == [first]
        assert lease(runner.database).position == 0  # not checkpointed: not ours
        with runner.database.transaction() as connection:
            connection.execute(
                sa.update(schema.checkpoints).where(row.name == NAME).values(lease_until=0.0)
            )
        runner.wait_until(third)
        assert sent == [first, first, second, third]


@pytest.mark.slow
def test_a_partition_whose_handler_outlasts_the_lease_keeps_its_member_alive(
    store: EventStore,
) -> None:
    """The keeper renews the group membership with the partition's lease: the other
    member neither counts this one gone nor takes its partition."""
    theirs: list[int] = []
    inside, hold = threading.Event(), threading.Event()

    def send(event: RecordedEvent) -> None:
        inside.set()
        assert hold.wait(60), "the test never let the handler go on"

    (only,) = notes(store, "a")
    ours = PartitionedRunner.for_subscription(
        store, Subscription(NAME, send), partitions=1, lease_ttl=TTL
    )
    other = PartitionedRunner.for_subscription(
        store,
        Subscription(NAME, lambda event: theirs.append(event.position)),
        partitions=1,
        lease_ttl=TTL,
    )
    with ours, other, released(hold):
        ours.start()
        until(inside.is_set, "the first delivery")
        other.start()
        since = time.time()
        (partition,) = ours.workers

        def member_until() -> float:
            with ours.database.reading() as connection:
                found = connection.execute(
                    sa.select(members.c.lease_until).where(
                        members.c.group_name == NAME, members.c.owner == ours.owner
                    )
                ).scalar_one_or_none()
            return found or 0.0

        def kept_or_lost() -> bool:
            taken = lease(ours.database, partition.name).owner != ours.owner
            return taken or member_until() == 0.0 or member_until() > since + KEPT

        until(kept_or_lost, "the membership to be kept or lost")
        assert lease(ours.database, partition.name).owner == ours.owner
        assert member_until() > since + KEPT
        assert theirs == [] and other.held == set()
        hold.set()
        until(lambda: lease(ours.database, partition.name).position >= only, "the delivery")
    assert theirs == []
